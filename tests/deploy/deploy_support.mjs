// Shared by the deployment tests: paths, the npm tools (scripts/fetch-deploy-tools.sh), rendering the
// kustomize overlays with kubectl, and the built binaries.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const k8sDir = path.join(repoRoot, 'deploy/k8s');
export const dockerDir = path.join(repoRoot, 'deploy/docker');
export const overlays = ['base', 'overlays/cpu', 'overlays/gpu'];

export const toolsDir = process.env.LLMC_DEPLOY_TOOLS || path.join(repoRoot, 'build/third_party/deploy-tools');
if (!fs.existsSync(path.join(toolsDir, 'node_modules'))) {
  throw new Error(`no npm tools in ${toolsDir}: run scripts/fetch-deploy-tools.sh`);
}
// The packages live outside this file's parents, so Node's own lookup cannot find them.
export const requireTool = createRequire(path.join(toolsDir, 'node_modules', 'index.js'));
export const YAML = requireTool('yaml');

export function renderOverlay(overlay) {
  const kubectl = process.env.LLMC_KUBECTL || 'kubectl';
  const result = spawnSync(kubectl, ['kustomize', path.join(k8sDir, overlay)], { encoding: 'utf8' });
  if (result.error) {
    throw new Error(`cannot run ${kubectl} (${result.error.code}): scripts/install-deps.sh installs it`);
  }
  if (result.status !== 0) throw new Error(`kubectl kustomize ${overlay} failed:\n${result.stderr}`);
  return parseYamlDocuments(result.stdout, overlay);
}

export function parseYamlDocuments(text, where) {
  const objects = [];
  for (const document of YAML.parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new Error(`${where}: ${document.errors[0].message}`);
    const object = document.toJS();
    if (object != null) objects.push(object);
  }
  return objects;
}

export function findObject(objects, kind, name) {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in the rendered manifests`);
  return found;
}

// Which binary runs in a container, from its image name (llmc/worker-cuda runs llmc-worker).
export function componentOfImage(image) {
  const match = /(?:^|\/)llmc\/(controller|gateway|worker)(?:-cuda)?(?::|$)/.exec(image);
  if (!match) throw new Error(`image ${image} is not an llmc image`);
  return match[1];
}

export function binaryPath(component) {
  const fromEnv = process.env[`LLMC_${component.toUpperCase()}_BINARY`];
  const binary = fromEnv || path.join(repoRoot, 'build', component, `llmc-${component}`);
  if (!fs.existsSync(binary)) throw new Error(`${binary} is missing: build it first (scripts/build.sh)`);
  return binary;
}

export function podSpecs(objects) {
  return objects.filter((o) => o.kind === 'Deployment').map((d) => ({ deployment: d, pod: d.spec.template.spec }));
}

// "30s", "1m30s", "500ms", "0" -> seconds.
export function durationSeconds(text) {
  const value = String(text);
  if (value === '0') return 0;
  const units = { h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  let rest = value;
  while (rest.length > 0) {
    const match = /^(\d+(?:\.\d+)?)(ms|h|m|s)/.exec(rest);
    if (!match) throw new Error(`not a duration: ${value}`);
    total += Number(match[1]) * units[match[2]];
    rest = rest.slice(match[0].length);
  }
  return total;
}
