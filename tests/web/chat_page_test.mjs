#!/usr/bin/env node
// Drives the gateway's web chat page (gateway/web/chat_page.html) in headless Chromium against a running
// cluster: model list, a streamed reply, Stop mid-stream, HTML injection, an error answer, New chat.
//
// Usage:
//   node tests/web/chat_page_test.mjs --url http://127.0.0.1:PORT/ --model NAME
//        [--api-base URL] [--api-key KEY] [--screenshot out.png] [--puppeteer-dir DIR]
//        [--chromium /usr/bin/chromium] [--timeout-ms 30000] [--no-ignore-eos] [--skip-if-missing]
//
// --url          the page (the gateway serves it at "/")
// --api-base     typed into the page's API base field (when the page is served from elsewhere)
// --api-key      typed into the API key field; the page must first show the 401 from /v1/models
// --puppeteer-dir where puppeteer-core is installed (an npm --prefix folder, its node_modules, or the
//                package folder itself); default: $PUPPETEER_DIR, then normal module resolution
// --no-ignore-eos do not send {"ignore_eos": true} with the long reply that is stopped
// --skip-if-missing exit 77 (CTest's SKIP_RETURN_CODE) instead of 1 when Chromium or puppeteer-core is missing
// Exit status 0 when every step passed, 1 on the first failure, 2 on bad usage.

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

function usage(message) {
  if (message) console.error(`error: ${message}`);
  console.error("usage: node chat_page_test.mjs --url URL --model NAME [--api-base URL] [--api-key KEY] " +
                "[--screenshot out.png] [--puppeteer-dir DIR] [--chromium PATH] [--timeout-ms N] [--no-ignore-eos] " +
                "[--skip-if-missing]");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { chromium: process.env.CHROMIUM || "/usr/bin/chromium", timeoutMs: 30000, ignoreEos: true };
  const valued = { "--url": "url", "--model": "model", "--api-base": "apiBase", "--api-key": "apiKey",
                   "--screenshot": "screenshot", "--puppeteer-dir": "puppeteerDir", "--chromium": "chromium",
                   "--timeout-ms": "timeoutMs" };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i], value;
    const eq = arg.indexOf("=");
    if (arg.startsWith("--") && eq > 0) { value = arg.slice(eq + 1); arg = arg.slice(0, eq); }
    if (arg === "--no-ignore-eos") { opts.ignoreEos = false; continue; }
    if (arg === "--skip-if-missing") { opts.skipIfMissing = true; continue; }
    if (arg === "--help" || arg === "-h") usage();
    const key = valued[arg];
    if (!key) usage(`unknown argument ${arg}`);
    if (value === undefined) {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      value = argv[++i];
    }
    opts[key] = value;
  }
  if (!opts.url) usage("--url is required");
  if (!opts.model) usage("--model is required");
  opts.timeoutMs = Number(opts.timeoutMs);
  if (!(opts.timeoutMs > 0)) usage("--timeout-ms must be a positive number");
  opts.puppeteerDir = opts.puppeteerDir || process.env.PUPPETEER_DIR || "";
  return opts;
}

function loadPuppeteer(dir) {
  if (!dir) return createRequire(import.meta.url)("puppeteer-core");
  const abs = path.resolve(dir);
  // Accept the npm --prefix folder, its node_modules, or the package folder itself.
  const candidates = [path.join(abs, "node_modules", "puppeteer-core"), path.join(abs, "puppeteer-core"), abs];
  for (const candidate of candidates) {
    if (fs.existsSync(path.join(candidate, "package.json"))) {
      return createRequire(path.join(abs, "noop.js"))(candidate);
    }
  }
  throw new Error(`puppeteer-core not found under ${abs} (install it with ` +
                  `'npm install --prefix ${abs} puppeteer-core@24')`);
}

class StepError extends Error {}
function check(condition, message) { if (!condition) throw new StepError(message); }

const opts = parseArgs(process.argv.slice(2));
function missing(what) {
  console.error(`${opts.skipIfMissing ? "SKIP" : "FAIL"} setup: ${what}`);
  process.exit(opts.skipIfMissing ? 77 : 1);
}
let puppeteer;
try {
  puppeteer = loadPuppeteer(opts.puppeteerDir);
  puppeteer = puppeteer.default || puppeteer;
} catch (e) {
  missing(`cannot load puppeteer-core: ${e.message}`);
}
if (!fs.existsSync(opts.chromium)) missing(`no Chromium at ${opts.chromium} (Debian: apt-get install -y chromium)`);

const T = opts.timeoutMs;
const pageErrors = [];
const consoleLines = [];
let passed = 0;
let browser, page;

// Waits for fn(...args) in the page to be truthy; on timeout fails with `message`.
async function waitFor(message, fn, args = [], timeout = T) {
  try {
    return await page.waitForFunction(fn, { timeout, polling: 50 }, ...args);
  } catch (e) {
    throw new StepError(`${message} (waited ${timeout} ms: ${e.message.split("\n")[0]})`);
  }
}

// Replaces the value of an input or textarea by typing, as a person would.
async function setField(selector, value) {
  await page.$eval(selector, (el) => { el.value = ""; el.dispatchEvent(new Event("input", { bubbles: true })); });
  if (value !== "") await page.type(selector, value);
}

async function lastAssistant() {
  return page.evaluate(() => {
    const all = document.querySelectorAll("#messages .message.assistant");
    const el = all[all.length - 1];
    if (!el) return null;
    return { count: all.length, state: el.dataset.state, text: el.querySelector(".content").textContent,
             meta: el.querySelector(".meta").textContent };
  });
}

// Waits for the n-th assistant message (1-based) to leave "streaming" and returns it.
async function waitForReply(n, what) {
  await waitFor(`${what}: assistant message #${n} never finished streaming`, (n) => {
    const all = document.querySelectorAll("#messages .message.assistant");
    return all.length >= n && all[n - 1].dataset.state !== "streaming";
  }, [n]);
  return lastAssistant();
}

async function sendMessage(text) {
  await page.focus("#input");
  await page.type("#input", text);
  await page.keyboard.press("Enter");
}

async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    e.message = `step ${name}: ${e.message}`;
    throw e;
  }
  passed++;
  console.log(`PASS ${name}`);
}

async function run() {
  browser = await puppeteer.launch({
    executablePath: opts.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking"],
    defaultViewport: { width: 1200, height: 800 },
  });
  page = await browser.newPage();
  page.setDefaultTimeout(T);
  page.on("pageerror", (e) => pageErrors.push(e.message));
  page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));

  await step("a. page loads and lists the model", async () => {
    const resp = await page.goto(opts.url, { waitUntil: "load", timeout: T });
    check(resp && resp.ok(), `GET ${opts.url} answered ${resp ? resp.status() : "nothing"}`);
    check((await page.title()) === "llmc chat", `page title is '${await page.title()}', want 'llmc chat'`);
    for (const id of ["model", "api-base", "api-key", "system", "temperature", "max-tokens", "input", "send",
                      "stop", "clear", "status", "messages"]) {
      check(await page.$(`#${id}`), `the page has no #${id}`);
    }
    if (opts.apiBase) {
      const base = opts.apiBase.replace(/\/+$/, "");
      const models = page.waitForResponse(
          (r) => r.url() === `${base}/v1/models` && r.request().method() === "GET", { timeout: T });
      await setField("#api-base", opts.apiBase);
      await models;
    }
    if (opts.apiKey) {
      // Authentication is on: without the key the model list must fail visibly in the status line.
      await waitFor("without an API key, #status never showed the /v1/models error", () => {
        const s = document.getElementById("status");
        return s.classList.contains("error") && s.textContent.trim() !== "" &&
               document.querySelectorAll("#model option").length === 0;
      });
      await setField("#api-key", opts.apiKey);
      // The key stays in this tab (sessionStorage) unless "Remember the key on this device" is ticked: off.
      const stored = await page.evaluate(() => ({
        remember: document.getElementById("remember-key").checked,
        local: Object.keys(localStorage).map((k) => localStorage.getItem(k)).join("\n"),
        session: sessionStorage.getItem("llmc-chat-api-key"),
      }));
      check(!stored.remember, "'Remember the key on this device' is ticked by default");
      check(!stored.local.includes(opts.apiKey), "the API key was written to localStorage");
      check(stored.session === opts.apiKey, `sessionStorage holds ${JSON.stringify(stored.session)}, not the key`);
    }
    await waitFor(`#model never listed '${opts.model}'`, (model) =>
        [...document.querySelectorAll("#model option")].some((o) => o.value === model), [opts.model]);
    await page.select("#model", opts.model);
    const status = await page.$eval("#status", (s) => ({ text: s.textContent, error: s.classList.contains("error") }));
    check(!status.error, `#status shows an error after the models loaded: ${status.text}`);
  });

  await step("b. a short reply streams to completion", async () => {
    await setField("#max-tokens", "24");
    await sendMessage("Hello there");
    check((await page.$eval("#input", (el) => el.value)) === "", "Enter did not send: #input still holds the text");
    const reply = await waitForReply(1, "first message");
    check(reply.state === "done", `assistant state is '${reply.state}', want 'done' (${reply.meta})`);
    check(reply.text.length > 0, "the assistant reply is empty");
    const users = await page.$$eval("#messages .message.user .content", (els) => els.map((e) => e.textContent));
    check(users.length === 1 && users[0] === "Hello there", `user messages shown: ${JSON.stringify(users)}`);
    const ws = await page.$eval("#messages .message.assistant .content", (el) => getComputedStyle(el).whiteSpace);
    check(ws === "pre-wrap", `assistant text has white-space '${ws}', want 'pre-wrap'`);
  });

  await step("c. Stop aborts a long streaming reply and keeps the partial text", async () => {
    await setField("#max-tokens", "2000");
    if (opts.ignoreEos) await setField("#extra", '{"ignore_eos": true}');
    // Shift+Enter makes a new line instead of sending.
    await page.focus("#input");
    await page.type("#input", "Tell me a very long story.");
    await page.keyboard.down("Shift");
    await page.keyboard.press("Enter");
    await page.keyboard.up("Shift");
    check(await page.$eval("#input", (el) => el.value.includes("\n")), "Shift+Enter did not insert a new line");
    check((await page.$$("#messages .message.user")).length === 1, "Shift+Enter sent the message");
    await page.type("#input", "Do not stop.");
    await page.keyboard.press("Enter");
    await waitFor("the second reply never showed streamed text while streaming", () => {
      const all = document.querySelectorAll("#messages .message.assistant");
      const el = all[1];
      return el && el.dataset.state === "streaming" && el.querySelector(".content").textContent.length > 0;
    });
    check(!(await page.$eval("#stop", (b) => b.disabled)), "#stop is disabled while a reply streams");
    check(await page.$eval("#send", (b) => b.disabled), "#send is enabled while a reply streams");
    await page.click("#stop");
    await waitFor("the reply did not reach data-state=\"stopped\" within 5 s of Stop", () => {
      const el = document.querySelectorAll("#messages .message.assistant")[1];
      return el.dataset.state !== "streaming";
    }, [], 5000);
    const stopped = await lastAssistant();
    check(stopped.state === "stopped",
          `after Stop the state is '${stopped.state}', want 'stopped' (did the reply end first? ${stopped.meta})`);
    check(stopped.text.length > 0, "the partial reply was not kept after Stop");
    await new Promise((r) => setTimeout(r, 1500));
    const later = await lastAssistant();
    check(later.text === stopped.text, `the text kept growing after Stop (${stopped.text.length} -> ` +
                                       `${later.text.length} chars)`);
    const users = await page.$$eval("#messages .message.user .content", (els) => els.map((e) => e.innerText));
    check(users[1] === "Tell me a very long story.\nDo not stop.",
          `the two-line user message is shown as ${JSON.stringify(users[1])}`);
    check(!(await page.$eval("#send", (b) => b.disabled)) && (await page.$eval("#stop", (b) => b.disabled)),
          "after Stop, #send should be enabled and #stop disabled");
    await setField("#max-tokens", "24");
    await setField("#extra", "");
  });

  await step("d. user text is shown literally, never as HTML", async () => {
    const evil = '<img src=x onerror="window.__pwned=1">';
    await sendMessage(evil);
    const reply = await waitForReply(3, "injection message");
    check(reply.state === "done", `assistant state is '${reply.state}', want 'done' (${reply.meta})`);
    const users = await page.$$eval("#messages .message.user .content", (els) => els.map((e) => e.textContent));
    check(users[users.length - 1] === evil, `the user message reads ${JSON.stringify(users[users.length - 1])}`);
    check((await page.$$("#messages img")).length === 0, "an <img> element was created inside #messages");
    check((await page.evaluate(() => typeof window.__pwned)) === "undefined", "window.__pwned was set");
  });

  await step("e. an error answer is shown in the conversation", async () => {
    await setField("#extra", '{"temperature": -5}');
    await sendMessage("This request is invalid.");
    const reply = await waitForReply(4, "invalid request");
    check(reply.state === "error", `assistant state is '${reply.state}', want 'error'`);
    const shown = await page.$eval("#messages .message.assistant:last-child", (el) => ({
      error: el.classList.contains("error"), text: el.textContent }));
    check(shown.error, "the failed reply is not marked with class 'error'");
    check(/temperature/i.test(reply.meta), `the error message does not explain the problem: '${reply.meta}'`);
    await setField("#extra", "");
  });

  if (opts.screenshot) {
    await step(`f. screenshot saved to ${opts.screenshot}`, async () => {
      await page.setViewport({ width: 1200, height: 800 });
      await page.screenshot({ path: opts.screenshot });
      check(fs.statSync(opts.screenshot).size > 1000, "the screenshot file is (nearly) empty");
    });
  }

  await step("g. New chat clears the conversation", async () => {
    await page.click("#clear");
    check((await page.$$("#messages .message")).length === 0, "messages remain after New chat");
    check(pageErrors.length === 0, `uncaught page errors: ${pageErrors.join(" | ")}`);
  });
}

let failed = 0;
try {
  await run();
} catch (e) {
  failed = 1;
  console.error(`FAIL ${e instanceof StepError ? "" : "(unexpected) "}${e.message}`);
  if (page) {
    try {
      const status = await page.$eval("#status", (s) => s.textContent);
      console.error(`  #status: ${status}`);
    } catch (ignored) { /* page gone */ }
    if (opts.screenshot) {
      const failShot = opts.screenshot.replace(/(\.png)?$/, ".fail.png");
      await page.screenshot({ path: failShot }).then(() => console.error(`  screenshot: ${failShot}`), () => {});
    }
  }
  if (pageErrors.length) console.error(`  page errors: ${pageErrors.join(" | ")}`);
  for (const line of consoleLines.slice(-20)) console.error(`  console ${line}`);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
