// Every overlay renders with `kubectl kustomize`, and every object it renders (and every file in
// deploy/k8s/extras) validates against the Kubernetes schemas of kubernetes-models, with no field
// the schemas do not declare.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { k8sDir, overlays, parseYamlDocuments, renderOverlay, requireTool } from './deploy_support.mjs';
import { modelModule, unknownFields } from './strict_schema.mjs';

function schemaProblems(object) {
  let Model;
  try {
    Model = requireTool(modelModule(object.apiVersion, object.kind))[object.kind];
  } catch {
    return [`${object.apiVersion} ${object.kind}: not a Kubernetes kind`];
  }
  try {
    new Model(object).validate();
  } catch (error) {
    return [`${object.kind}/${object.metadata?.name}: ${error.message}`];
  }
  return unknownFields(object);
}

const expectedKinds = {
  Namespace: 1, ConfigMap: 1, PersistentVolumeClaim: 1, Deployment: 3, Service: 2,
  PodDisruptionBudget: 2, HorizontalPodAutoscaler: 1, NetworkPolicy: 4,
};

for (const overlay of overlays) {
  test(`${overlay}: renders, and every object validates against the Kubernetes schemas`, () => {
    const objects = renderOverlay(overlay);
    const counts = {};
    for (const object of objects) counts[object.kind] = (counts[object.kind] || 0) + 1;
    assert.deepEqual(counts, expectedKinds);
    assert.deepEqual(objects.flatMap(schemaProblems), []);
    for (const object of objects.filter((o) => o.kind !== 'Namespace')) {
      assert.equal(object.metadata.namespace, 'llmc', `${object.kind}/${object.metadata.name}`);
    }
  });
}

test('extras: every manifest validates against the Kubernetes schemas', () => {
  const dir = path.join(k8sDir, 'extras');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  assert.ok(files.length > 0);
  for (const file of files) {
    const objects = parseYamlDocuments(fs.readFileSync(path.join(dir, file), 'utf8'), file);
    assert.deepEqual(objects.flatMap(schemaProblems), [], file);
  }
});

test('the checks reject an unknown field, a wrong type and an unknown kind', () => {
  const deployment = renderOverlay('base').find((o) => o.kind === 'Deployment');
  const container = deployment.spec.template.spec.containers[0];
  container.readinessProbe.grcp = { port: 1 };
  assert.match(schemaProblems(deployment).join('\n'), /readinessProbe\.grcp: unknown field/);
  delete container.readinessProbe.grcp;
  container.ports[0].containerPort = 'grpc';
  assert.match(schemaProblems(deployment).join('\n'), /containerPort must be integer/);
  assert.match(schemaProblems({ apiVersion: 'v1', kind: 'Deploymnet', metadata: {} }).join(''), /not a Kubernetes kind/);
});
