#!/usr/bin/python3
"""Soak test of a local llmc cluster (run by scripts/soak.sh MINUTES).

Starts a controller, two workers and a gateway on free loopback ports, then for MINUTES keeps a mixed
streaming load on the gateway: streamed chats whose tokens are counted, plain completions, and clients
that hang up mid-stream. Every so often a worker is restarted (SIGTERM, drain, start again). At the end it
prints the requests served, the errors by kind, the resident memory of every process after warm-up and at
the end, and any stream whose tokens were lost or duplicated. Exits 1 on a lost or duplicated token, when
the controller or gateway grew by more than 10 % after warm-up, when a process died, or when nothing was
served.
"""

import argparse
import collections
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Cluster:
    def __init__(self, build, model, log_dir):
        self.build, self.model, self.log_dir = build, model, log_dir
        self.controller_port, self.gateway_port = free_port(), free_port()
        self.processes = {}
        self.worker_ports = {f"worker-{i}": (free_port(), free_port()) for i in range(2)}
        self.restarts = 0

    def _start(self, name, argv):
        log = open(os.path.join(self.log_dir, f"{name}.log"), "ab")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def start_worker(self, name):
        grpc_port, metrics_port = self.worker_ports[name]
        self._start(name, [
            f"{self.build}/worker/llmc-worker", f"--model_path={self.model}",
            f"--listen_address=127.0.0.1:{grpc_port}", f"--metrics_address=127.0.0.1:{metrics_port}",
            f"--controller_address=127.0.0.1:{self.controller_port}", f"--worker_id={name}", "--num_threads=1",
            f"--kv_cache_bytes={256 << 20}", "--drain_grace_period=5s"])

    def start(self):
        self._start("controller", [
            f"{self.build}/controller/llmc-controller", f"--listen_address=127.0.0.1:{self.controller_port}",
            f"--metrics_address=127.0.0.1:{free_port()}", "--heartbeat_interval=1s"])
        for name in self.worker_ports:
            self.start_worker(name)
        self._start("gateway", [
            f"{self.build}/gateway/llmc-gateway", f"--listen_address=127.0.0.1:{self.gateway_port}",
            f"--controller_address=127.0.0.1:{self.controller_port}", "--routing_refresh_interval=500ms",
            "--request_timeout=60s"])
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                status, body = request(self.gateway_port, "GET", "/v1/models", None)
                if status == 200 and json.loads(body)["data"]:
                    return json.loads(body)["data"][0]["id"]
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit("soak: the cluster did not come up (logs in %s)" % self.log_dir)

    def restart_worker(self, name):
        process = self.processes[name]
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.start_worker(name)
        self.restarts += 1

    def stop(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()

    def memory(self):
        return {name: rss_kib(process.pid) for name, process in self.processes.items()}


def request(port, method, path, body, timeout=120):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body),
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Load:
    def __init__(self, port, model, deadline):
        self.port, self.model, self.deadline = port, model, deadline
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.violations = []

    def count(self, kind, violation=None):
        with self.lock:
            self.counts[kind] += 1
            if violation:
                self.violations.append(violation)

    def streamed_chat(self, rng, hang_up):
        max_tokens = rng.randint(4, 48)
        body = {"model": self.model, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}, "logprobs": True, "temperature": rng.random(),
                "messages": [{"role": "user", "content": "Tell me about %d things." % rng.randint(1, 999)}]}
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("POST", "/v1/chat/completions", body=json.dumps(body),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                response.read()
                return self.count(f"http {response.status}")
            tokens, usage, done, error = 0, None, False, None
            stop_after = rng.randint(1, max_tokens) if hang_up else None
            while True:
                line = response.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    error = event["error"].get("type", "error")
                    continue
                for choice in event.get("choices", []):
                    tokens += len((choice.get("logprobs") or {}).get("content") or [])
                usage = event.get("usage") or usage
                if stop_after is not None and tokens >= stop_after:
                    return self.count("hung up mid-stream (on purpose)")
            if error:
                return self.count(f"stream error event: {error}")
            if not done:
                return self.count("stream ended without [DONE]")
            completion = usage["completion_tokens"] if usage else None
            if tokens != max_tokens or completion != max_tokens:
                return self.count("token count mismatch", violation=(
                    f"asked {max_tokens} tokens, streamed {tokens}, usage says {completion}"))
            self.count("streamed chat ok")
        finally:
            connection.close()

    def completion(self, rng):
        max_tokens = rng.randint(1, 32)
        body = {"model": self.model, "prompt": "Number %d is" % rng.randint(1, 10**6), "max_tokens": max_tokens,
                "ignore_eos": True, "temperature": 0}
        status, payload = request(self.port, "POST", "/v1/completions", body)
        if status != 200:
            return self.count(f"http {status}")
        completion = json.loads(payload)["usage"]["completion_tokens"]
        if completion != max_tokens:
            return self.count("token count mismatch",
                              violation=f"completion asked {max_tokens} tokens, usage says {completion}")
        self.count("completion ok")

    def client(self, seed):
        rng = random.Random(seed)
        while time.time() < self.deadline:
            choice = rng.random()
            try:
                if choice < 0.55:
                    self.streamed_chat(rng, hang_up=False)
                elif choice < 0.75:
                    self.streamed_chat(rng, hang_up=True)
                else:
                    self.completion(rng)
            except (OSError, http.client.HTTPException, ValueError, KeyError) as error:
                self.count(f"client exception: {type(error).__name__}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", required=True)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--restart-every", type=float, default=45, help="seconds between worker restarts")
    parser.add_argument("--log-dir", default="build/soak")
    args = parser.parse_args()
    os.makedirs(args.log_dir, exist_ok=True)

    # A SIGTERM (a CI timeout, say) ends the run through the finally below, so no process is left behind.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    cluster = Cluster(args.build, args.model, args.log_dir)
    died = []
    try:
        model = cluster.start()
        started = time.time()
        duration = args.minutes * 60
        load = Load(cluster.gateway_port, model, started + duration)
        threads = [threading.Thread(target=load.client, args=(seed,), daemon=True) for seed in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(min(60.0, duration / 10))
        after_warm_up = cluster.memory()
        rng = random.Random(1)
        next_restart = time.time() + args.restart_every
        while time.time() < started + duration and not died:
            time.sleep(1)
            died = [name for name, process in cluster.processes.items() if process.poll() is not None]
            if not died and time.time() >= next_restart:
                cluster.restart_worker(rng.choice(sorted(cluster.worker_ports)))
                next_restart = time.time() + args.restart_every
        load.deadline = 0  # after a death, the clients stop too
        for thread in threads:
            thread.join(timeout=180)
        at_end = cluster.memory()
    finally:
        cluster.stop()

    with load.lock:
        counts = dict(load.counts)
        violations = list(load.violations)
    served = sum(n for kind, n in counts.items() if kind.endswith(" ok"))
    print(f"soak: {args.minutes:g} min, {args.clients} clients, {cluster.restarts} worker restarts, "
          f"{served} requests served")
    for kind, n in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"  {n:7d}  {kind}")
    print("resident memory (KiB): after warm-up -> end")
    grew = []
    for name in after_warm_up:
        before, after = after_warm_up[name], at_end.get(name, 0)
        growth = (after - before) / before * 100 if before else 0
        note = " (restarted meanwhile)" if name.startswith("worker") and cluster.restarts else ""
        print(f"  {name:12s} {before:9d} -> {after:9d}  {growth:+6.1f} %{note}")
        if name in ("controller", "gateway") and growth > 10:
            grew.append(name)
    for violation in violations[:20]:
        print("  LOST OR DUPLICATED TOKENS:", violation)
    if violations or grew or died or served == 0:
        print(f"soak: FAILED ({len(violations)} token count mismatches; grew over 10 %: {grew or 'none'}; "
              f"died: {died or 'none'}; {served} served; logs in {args.log_dir})")
        return 1
    print("soak: passed (no lost or duplicated tokens; controller and gateway within 10 % after warm-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
