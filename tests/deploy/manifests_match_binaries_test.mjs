// The manifests cannot drift from the code: every container's args are flags the binary lists in
// --help; the binary, given those args and the rendered ConfigMap, accepts them (--print-config exits
// 0); and the ports, probes, addresses and timings in the manifests match the effective configuration.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import {
  YAML, binaryPath, componentOfImage, durationSeconds, overlays, podSpecs, renderOverlay,
} from './deploy_support.mjs';

const samplePod = { POD_IP: '10.1.2.3', POD_NAME: 'llmc-worker-5d9c7-x2x4q' };

function run(binary, args) {
  const result = spawnSync(binary, args, { encoding: 'utf8' });
  assert.equal(result.status, 0, `${path.basename(binary)} ${args.join(' ')}:\n${result.stderr}`);
  return result.stdout;
}

function flagsOf(component) {
  const help = run(binaryPath(component), ['--help']);
  const flags = new Set([...help.matchAll(/^ {2}--([a-z0-9_.]+)(?:=|$)/gm)].map((m) => m[1]));
  assert.ok(flags.has('config') && flags.has('listen_address'), `cannot read the flags of llmc-${component} --help`);
  return flags;
}

const portOf = (address) => Number(/:(\d+)$/.exec(address)[1]);

function namedPort(container, name) {
  const port = (container.ports || []).find((p) => p.name === name);
  assert.ok(port, `${container.name} has no port named ${name}`);
  return port.containerPort;
}

function probePort(container, probe) {
  const action = probe.grpc || probe.httpGet || probe.tcpSocket;
  return typeof action.port === 'number' ? action.port : namedPort(container, action.port);
}

// The container's args with $(VAR) expanded as the kubelet would, and --config pointed at the
// rendered ConfigMap's file written to `dir`.
function resolveArgs(container, pod, objects, dir) {
  const env = new Map((container.env || []).map((e) => [e.name, e]));
  const used = new Set();
  const args = container.args.map((arg) => {
    let resolved = arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (_, name) => {
      assert.ok(env.has(name), `${container.name}: ${arg} uses $(${name}), which env does not define`);
      used.add(name);
      return samplePod[name] ?? `sample-${name}`;
    });
    const config = /^--config=(.*)$/.exec(resolved);
    if (config) resolved = `--config=${configFile(config[1], container, pod, objects, dir)}`;
    return resolved;
  });
  // llmc binaries read no environment variables but these (secrets, which belong in no arg nor ConfigMap):
  // another one that no arg uses is configuration that does nothing.
  const readByBinaries = new Set(['LLMC_CLUSTER_SECRET', 'LLMC_API_KEYS']);
  for (const name of env.keys()) {
    assert.ok(used.has(name) || readByBinaries.has(name), `${container.name}: env ${name} is used by no arg`);
  }
  return args;
}

function configFile(file, container, pod, objects, dir) {
  const mount = container.volumeMounts.find((m) => file.startsWith(`${m.mountPath}/`));
  assert.ok(mount, `${container.name}: --config=${file} is on no volume`);
  const volume = pod.volumes.find((v) => v.name === mount.name);
  assert.ok(volume.configMap, `${container.name}: ${file} is not on a ConfigMap volume`);
  const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume.configMap.name);
  assert.ok(configMap, `ConfigMap ${volume.configMap.name} is not rendered`);
  const key = file.slice(mount.mountPath.length + 1);
  assert.ok(key in configMap.data, `ConfigMap ${configMap.metadata.name} has no ${key}`);
  const local = path.join(dir, key);
  fs.writeFileSync(local, configMap.data[key]);
  return local;
}

// The Service that a dial address names must select the controller and forward to its gRPC port.
function checkControllerAddress(address, objects, controllerPort, who) {
  const [host, port] = [address.replace(/:\d+$/, ''), portOf(address)];
  const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === host);
  assert.ok(service, `${who}: controller_address ${address} names no Service`);
  assert.equal(service.spec.selector['app.kubernetes.io/name'], 'llmc-controller', `${who}: ${address}`);
  const servicePort = service.spec.ports.find((p) => p.port === port);
  assert.ok(servicePort, `${who}: Service ${host} has no port ${port}`);
  const controller = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'llmc-controller');
  const target = servicePort.targetPort;
  const targetNumber = typeof target === 'number' ? target : namedPort(controller.spec.template.spec.containers[0], target);
  assert.equal(targetNumber, controllerPort, `${who}: ${address} does not reach the controller's gRPC port`);
}

function preStopSleepSeconds(container) {
  const command = container.lifecycle?.preStop?.exec?.command || [];
  return command[0] === 'sleep' ? Number(command[1]) : 0;
}

function effectiveConfigs(objects, dir) {
  const configs = {};
  for (const { deployment, pod } of podSpecs(objects)) {
    for (const container of pod.containers) {
      const component = componentOfImage(container.image);
      const flags = flagsOf(component);
      for (const arg of container.args) {
        const flag = /^--([^=]+)/.exec(arg);
        assert.ok(flag && flags.has(flag[1]), `${deployment.metadata.name}: llmc-${component} has no flag ${arg}`);
      }
      const args = resolveArgs(container, pod, objects, dir);
      const printed = YAML.parse(run(binaryPath(component), [...args, '--print-config']));
      configs[component] = { config: printed[component], deployment, pod, container };
    }
  }
  return configs;
}

for (const overlay of overlays) {
  test(`${overlay}: container args, env, ports, probes and timings match the binaries`, () => {
    const objects = renderOverlay(overlay);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmc-deploy-'));
    try {
      const configs = effectiveConfigs(objects, dir);
      assert.deepEqual(Object.keys(configs).sort(), ['controller', 'gateway', 'worker']);
      const controllerPort = portOf(configs.controller.config.listen_address);

      for (const [component, { config, deployment, container }] of Object.entries(configs)) {
        const servingPort = namedPort(container, component === 'gateway' ? 'http' : 'grpc');
        assert.equal(portOf(config.listen_address), servingPort, `${component}: listen_address vs containerPort`);
        // The gateway serves /metrics on its API port; the others on a port of their own.
        const metricsPort = component === 'gateway' ? servingPort : portOf(config.metrics_address);
        if (component !== 'gateway') assert.equal(namedPort(container, 'metrics'), metricsPort, component);
        const annotations = deployment.spec.template.metadata.annotations;
        assert.equal(annotations['prometheus.io/scrape'], 'true', component);
        assert.equal(Number(annotations['prometheus.io/port']), metricsPort, `${component}: scrape port`);
        assert.equal(annotations['prometheus.io/path'], '/metrics', component);
        for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
          if (container[kind]) assert.equal(probePort(container, container[kind]), servingPort, `${component} ${kind}`);
        }
        if (component !== 'controller') checkControllerAddress(config.controller_address, objects, controllerPort, component);
      }

      const worker = configs.worker;
      assert.equal(worker.config.advertised_address, `${samplePod.POD_IP}:${portOf(worker.config.listen_address)}`);
      assert.equal(worker.config.worker_id, samplePod.POD_NAME);
      for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
        assert.ok(worker.container[kind]?.grpc, `worker ${kind} must ask grpc.health.v1`);
      }
      // SIGTERM comes after the preStop hook; then the drain, the last messages and the deregistration.
      const needed = preStopSleepSeconds(worker.container) + durationSeconds(worker.config.drain_grace_period) + 5;
      assert.ok(worker.pod.terminationGracePeriodSeconds >= needed,
                `worker terminationGracePeriodSeconds ${worker.pod.terminationGracePeriodSeconds} < ${needed}`);
      const gateway = configs.gateway;
      const gatewayNeeded = preStopSleepSeconds(gateway.container) + durationSeconds(gateway.config.drain_grace_period) + 5;
      assert.ok(gateway.pod.terminationGracePeriodSeconds >= gatewayNeeded,
                `gateway terminationGracePeriodSeconds ${gateway.pod.terminationGracePeriodSeconds} < ${gatewayNeeded}`);

      const modelMount = worker.container.volumeMounts.find((m) => worker.config.model_path.startsWith(`${m.mountPath}/`));
      assert.ok(modelMount, `worker model_path ${worker.config.model_path} is on no volume`);
      assert.equal(modelMount.readOnly, true, 'the model volume is mounted read-only');

      const device = { base: 'auto', 'overlays/cpu': 'cpu', 'overlays/gpu': 'cuda' }[overlay];
      assert.equal(worker.config.device, device);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
