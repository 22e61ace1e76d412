// What the issue asks of the manifests beyond the schemas: who may reach whom under the
// NetworkPolicies, locked-down security contexts, the controller's single Recreate replica, the
// gateway's replicas, disruption budget and autoscaler, the worker's volumes and the GPU overlay.
import assert from 'node:assert/strict';
import test from 'node:test';
import { findObject, overlays, podSpecs, renderOverlay } from './deploy_support.mjs';

const labelsOf = (name) => ({ 'app.kubernetes.io/name': name });
const matches = (selector, labels) =>
  Object.entries(selector?.matchLabels || {}).every(([key, value]) => labels[key] === value);

// Ingress allowed from a pod (labels, same namespace unless otherNamespace) to a pod on a TCP port,
// evaluated as Kubernetes does: denied once any policy selects the target for Ingress, unless a rule
// of one of them admits the source and the port.
function allowed(policies, from, to, port, otherNamespace = false) {
  const selecting = policies.filter((p) => matches(p.spec.podSelector, to) && p.spec.policyTypes.includes('Ingress'));
  if (selecting.length === 0) return true;
  return selecting.some((p) => (p.spec.ingress || []).some((rule) => {
    const portOk = !rule.ports || rule.ports.some((r) => r.port === port);
    const peerOk = !rule.from || rule.from.some((peer) =>
      peer.namespaceSelector ? matches(peer.namespaceSelector, {}) && matches(peer.podSelector, from)
                             : !otherNamespace && matches(peer.podSelector, from));
    return portOk && peerOk;
  }));
}

for (const overlay of overlays) {
  test(`${overlay}: only the gateway reaches the workers, only the gateway and workers the controller`, () => {
    const policies = renderOverlay(overlay).filter((o) => o.kind === 'NetworkPolicy');
    const [gateway, worker, controller, other] =
        ['llmc-gateway', 'llmc-worker', 'llmc-controller', 'something-else'].map(labelsOf);
    const reach = (from, to, port, otherNamespace) => allowed(policies, from, to, port, otherNamespace);
    assert.ok(reach(gateway, worker, 21002), 'gateway -> worker gRPC');
    assert.ok(reach(gateway, controller, 21001), 'gateway -> controller gRPC');
    assert.ok(reach(worker, controller, 21001), 'worker -> controller gRPC');
    assert.ok(reach(other, gateway, 8000, true), 'clients -> gateway HTTP');
    assert.ok(reach(other, worker, 21082, true) && reach(other, controller, 21081, true), 'Prometheus -> metrics');
    for (const [from, otherNamespace] of [[other, false], [other, true], [controller, false], [worker, false]]) {
      assert.ok(!reach(from, worker, 21002, otherNamespace), `${JSON.stringify(from)} must not reach worker gRPC`);
    }
    for (const [from, otherNamespace] of [[other, false], [other, true]]) {
      assert.ok(!reach(from, controller, 21001, otherNamespace), 'others must not reach controller gRPC');
    }
    assert.ok(!reach(other, labelsOf('llmc-model-loader'), 9999), 'everything else in the namespace is closed');
  });

  test(`${overlay}: every pod runs non-root, without privilege escalation or capabilities`, () => {
    for (const { deployment, pod } of podSpecs(renderOverlay(overlay))) {
      const name = deployment.metadata.name;
      assert.equal(pod.securityContext.runAsNonRoot, true, name);
      assert.ok(pod.securityContext.runAsUser > 0, name);
      assert.equal(pod.automountServiceAccountToken, false, name);
      for (const container of [...pod.containers, ...(pod.initContainers || [])]) {
        const context = container.securityContext;
        assert.equal(context.allowPrivilegeEscalation, false, name);
        assert.equal(context.readOnlyRootFilesystem, true, name);
        assert.deepEqual(context.capabilities.drop, ['ALL'], name);
        assert.ok(!context.capabilities.add, name);
        assert.ok(container.resources?.requests?.memory, `${name}: memory request`);
      }
    }
  });

  test(`${overlay}: replicas, update strategies, disruption budgets and the autoscaler`, () => {
    const objects = renderOverlay(overlay);
    const controller = findObject(objects, 'Deployment', 'llmc-controller');
    assert.equal(controller.spec.replicas, 1);
    assert.equal(controller.spec.strategy.type, 'Recreate');
    assert.equal(findObject(objects, 'Service', 'llmc-controller').spec.type, 'ClusterIP');

    const gateway = findObject(objects, 'Deployment', 'llmc-gateway');
    assert.ok(gateway.spec.replicas >= 2);
    assert.ok(gateway.spec.template.spec.containers[0].resources.requests.cpu, 'the HPA needs a CPU request');
    const hpa = findObject(objects, 'HorizontalPodAutoscaler', 'llmc-gateway');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'llmc-gateway' });
    assert.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas > hpa.spec.minReplicas);
    for (const name of ['llmc-gateway', 'llmc-worker']) {
      const budget = findObject(objects, 'PodDisruptionBudget', name);
      const pods = findObject(objects, 'Deployment', name).spec.template.metadata.labels;
      assert.ok(matches(budget.spec.selector, pods), `PDB ${name} selects its pods`);
    }
    for (const service of objects.filter((o) => o.kind === 'Service')) {
      const target = podSpecs(objects).find(({ deployment }) =>
        matches({ matchLabels: service.spec.selector }, deployment.spec.template.metadata.labels));
      assert.ok(target, `Service ${service.metadata.name} selects no pods`);
      const names = target.pod.containers.flatMap((c) => c.ports.map((p) => p.name));
      for (const port of service.spec.ports) assert.ok(names.includes(port.targetPort), `${service.metadata.name}: ${port.targetPort}`);
    }
  });

  test(`${overlay}: worker volumes, and the device its overlay asks for`, () => {
    const objects = renderOverlay(overlay);
    const worker = findObject(objects, 'Deployment', 'llmc-worker');
    const pod = worker.spec.template.spec;
    const volume = (mountPath) => {
      const mount = pod.containers[0].volumeMounts.find((m) => m.mountPath === mountPath);
      assert.ok(mount, `worker mounts nothing at ${mountPath}`);
      return pod.volumes.find((v) => v.name === mount.name);
    };
    assert.equal(volume('/dev/shm').emptyDir.medium, 'Memory');
    assert.ok(volume('/tmp').emptyDir, 'a writable /tmp beside the read-only root');
    const models = volume('/models');
    assert.ok(models.persistentVolumeClaim, 'models come from a volume, not the image');
    findObject(objects, 'PersistentVolumeClaim', models.persistentVolumeClaim.claimName);
    const container = pod.containers[0];
    const gpus = container.resources.limits?.['nvidia.com/gpu'];
    if (overlay === 'overlays/gpu') {
      assert.equal(gpus, 1);
      assert.match(container.image, /(^|\/)llmc\/worker-cuda:/);
      assert.ok(pod.tolerations.some((t) => t.key === 'nvidia.com/gpu'));
    } else {
      assert.equal(gpus, undefined);
      assert.match(container.image, /(^|\/)llmc\/worker:/);
    }
    if (overlay === 'overlays/cpu') assert.equal(container.resources.limits.cpu, container.resources.requests.cpu);
  });
}

for (const overlay of overlays) {
  test(`${overlay}: every process gets the cluster secret from the Secret llmc-cluster-secret`, () => {
    for (const { deployment, pod } of podSpecs(renderOverlay(overlay))) {
      if (!deployment.metadata.name.match(/^llmc-(controller|worker|gateway)$/)) continue;
      const secret = (pod.containers[0].env || []).find((e) => e.name === 'LLMC_CLUSTER_SECRET');
      assert.ok(secret, `${deployment.metadata.name}: LLMC_CLUSTER_SECRET`);
      assert.deepEqual(secret.valueFrom.secretKeyRef, { name: 'llmc-cluster-secret', key: 'cluster-secret' },
                       `${deployment.metadata.name}: from the Secret, never a literal value`);
    }
  });
}
