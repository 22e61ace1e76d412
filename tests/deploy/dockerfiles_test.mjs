// The Dockerfiles in deploy/docker lint clean with dockerfile-utils (every rule at error severity),
// and each image is what the manifests expect: the right binary as entrypoint, the binary's default
// ports exposed, the uid the pods run as, the model not baked in, and every Debian package that provides
// a library the built binary links installed in its runtime stage.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { YAML, binaryPath, dockerDir, findObject, renderOverlay, requireTool } from './deploy_support.mjs';

const dockerfiles = fs.readdirSync(dockerDir).filter((f) => f === 'Dockerfile' || f.endsWith('.Dockerfile'));
const images = {
  controller: { file: 'Dockerfile', binary: 'controller' },
  gateway: { file: 'Dockerfile', binary: 'gateway' },
  worker: { file: 'Dockerfile', binary: 'worker' },
  'worker-cuda': { file: 'worker-cuda.Dockerfile', binary: 'worker' },
};

// Instructions with continuation lines joined, per stage: { name, from, instructions: [[KEYWORD, text]] }.
function stagesOf(file) {
  const text = fs.readFileSync(path.join(dockerDir, file), 'utf8').replace(/\\\n/g, ' ');
  const stages = [];
  for (const line of text.split('\n')) {
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match || line.trim().startsWith('#')) continue;
    const [keyword, rest] = [match[1].toUpperCase(), match[2].trim()];
    if (keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      stages.push({ from: from[1], name: from[2], instructions: [] });
    } else if (stages.length > 0) {
      stages[stages.length - 1].instructions.push([keyword, rest]);
    }
  }
  return stages;
}

// A stage's instructions, its parents' (FROM another stage) first.
function lineage(stages, name) {
  const stage = stages.find((s) => s.name === name);
  assert.ok(stage, `no stage ${name}`);
  const parent = stages.find((s) => s.name === stage.from);
  return parent ? [...lineage(stages, parent.name), ...stage.instructions] : stage.instructions;
}

const aptPackages = (instructions) => instructions
  .filter(([k, t]) => k === 'RUN' && t.includes('apt-get install'))
  .flatMap(([, t]) => [...t.matchAll(/apt-get install ([^&;]*)/g)].flatMap((m) => m[1].split(/\s+/)))
  .filter((word) => word && !word.startsWith('-'));

// The Debian packages that provide the libraries a binary names in its NEEDED entries.
function neededPackages(binary) {
  const sonames = [...execFileSync('readelf', ['-d', binary], { encoding: 'utf8' })
    .matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const resolved = new Map([...execFileSync('ldd', [binary], { encoding: 'utf8' })
    .matchAll(/^\s*(\S+) => (\/\S+)/gm)].map((m) => [m[1], m[2]]));
  const packages = new Map();
  for (const soname of sonames) {
    assert.ok(resolved.has(soname), `${binary}: ldd cannot find ${soname}`);
    const real = fs.realpathSync(resolved.get(soname));
    const candidates = [real, real.replace(/^\/usr\//, '/'), real.replace(/^\/lib/, '/usr/lib')];
    let owner = null;
    for (const candidate of candidates) {
      const result = spawnSync('dpkg-query', ['-S', candidate], { encoding: 'utf8' });
      if (result.status === 0) {
        owner = result.stdout.split(':')[0];
        break;
      }
    }
    assert.ok(owner, `no Debian package owns ${real}`);
    packages.set(soname, owner);
  }
  return packages;
}

// In debian:12-slim already.
const basePackages = new Set(['libc6', 'libstdc++6', 'libgcc-s1']);
// The images are Debian 12's: the packages a binary built here needs name that release's packages only when
// this machine runs it too (Debian 13's are other names, libyaml-cpp0.8 for libyaml-cpp0.7, say).
const imageRelease = '12';
const hostRelease = (fs.readFileSync('/etc/os-release', 'utf8').match(/^VERSION_ID="?(\d+)/m) || [])[1];

test('every Dockerfile lints clean with dockerfile-utils', () => {
  const { validate, ValidationSeverity } = requireTool('dockerfile-utils');
  const strict = Object.fromEntries(['deprecatedMaintainer', 'directiveCasing', 'emptyContinuationLine',
    'instructionCasing', 'instructionCmdMultiple', 'instructionEntrypointMultiple',
    'instructionHealthcheckMultiple', 'instructionJSONInSingleQuotes', 'instructionWorkdirRelative']
    .map((rule) => [rule, ValidationSeverity.ERROR]));
  assert.deepEqual(dockerfiles.sort(), ['Dockerfile', 'worker-cuda.Dockerfile']);
  for (const file of dockerfiles) {
    const diagnostics = validate(fs.readFileSync(path.join(dockerDir, file), 'utf8'), strict)
      .map((d) => `${file}:${d.range.start.line + 1}: ${d.message}`);
    assert.deepEqual(diagnostics, []);
  }
  const broken = validate('FROM debian:12\nrun true\nCOPY --form=builder a b\n', strict);
  assert.equal(broken.length, 2, 'the linter must catch a lower-case instruction and an unknown flag');
});

test('each builder stage builds on Debian 12 with the project scripts; the CUDA one on a CUDA libtorch', () => {
  for (const file of dockerfiles) {
    const stages = stagesOf(file);
    const builder = stages.find((s) => s.name === 'builder');
    const defaults = fs.readFileSync(path.join(dockerDir, file), 'utf8');
    assert.match(defaults, /^ARG BUILDER_IMAGE=debian:12$/m, file);
    assert.equal(builder.from, '${BUILDER_IMAGE}', file);
    const runs = builder.instructions.filter(([k]) => k === 'RUN').map(([, t]) => t).join('\n');
    assert.match(runs, /scripts\/install-deps\.sh/, file);
    assert.match(runs, /scripts\/build\.sh .*-DLLMC_BUILD_TESTS=OFF/, file);
    if (file === 'worker-cuda.Dockerfile') {
      assert.match(runs, /-DLLMC_WITH_CUDA=ON/);
      assert.match(runs, /-DCMAKE_PREFIX_PATH=\$\(\S+python -c 'import torch; print\(torch\.utils\.cmake_prefix_path\)'\)/);
    }
    const ignore = fs.readFileSync(path.join(dockerDir, `${file}.dockerignore`), 'utf8').split('\n');
    for (const entry of ['.git', 'build', 'packages']) assert.ok(ignore.includes(entry), `${file}.dockerignore: ${entry}`);
  }
});

for (const [image, { file, binary }] of Object.entries(images)) {
  test(`${image} image: entrypoint, ports, uid, no model inside, runtime libraries`, (t) => {
    const instructions = lineage(stagesOf(file), image);
    const last = (keyword) => instructions.filter(([k]) => k === keyword).map(([, t]) => t).pop();
    const target = `/usr/local/bin/llmc-${binary}`;
    assert.equal(last('ENTRYPOINT'), `["${target}"]`);
    assert.ok(instructions.some(([k, t]) => k === 'COPY' && t === `--from=builder /src/build/${binary}/llmc-${binary} ${target}`),
              `${image}: llmc-${binary} is not copied from the builder to ${target}`);
    for (const [k, t] of instructions) {
      if (k === 'COPY' || k === 'ADD') assert.doesNotMatch(t, /models?\b|packages\/|\.pt\b/, `${image}: ${t}`);
    }

    const uid = Number(last('USER').split(':')[0]);
    const pod = findObject(renderOverlay('base'), 'Deployment', `llmc-${binary}`).spec.template.spec;
    assert.ok(uid > 0, `${image}: USER must be a non-root numeric uid`);
    assert.equal(uid, pod.securityContext.runAsUser, `${image}: USER vs the pod's runAsUser`);

    const defaults = YAML.parse(execFileSync(binaryPath(binary), ['--print-config'], { encoding: 'utf8' }))[binary];
    const ports = [defaults.listen_address, defaults.metrics_address].filter(Boolean).map((a) => a.split(':').pop());
    assert.deepEqual(last('EXPOSE').split(/\s+/).sort(), ports.sort(), `${image}: EXPOSE vs the binary's ports`);

    const installed = new Set(aptPackages(instructions));
    const needed = hostRelease === imageRelease ? neededPackages(binaryPath(binary)) : new Map();
    if (hostRelease !== imageRelease) {
      t.diagnostic(`runtime libraries not compared: this machine runs Debian ${hostRelease}, the images Debian ${imageRelease}`);
    }
    for (const [soname, pkg] of needed) {
      // The CUDA image's libtorch is the PyTorch wheel's, in /opt/llmc/lib, not Debian's.
      if (image === 'worker-cuda' && pkg.startsWith('libtorch')) continue;
      assert.ok(basePackages.has(pkg) || installed.has(pkg), `${image}: ${soname} needs ${pkg}, which is not installed`);
    }
    if (image === 'worker-cuda') {
      assert.ok(![...installed].some((p) => p.startsWith('libtorch')), 'the CUDA image must not carry a CPU libtorch');
      assert.ok(instructions.some(([k, t]) => k === 'ENV' && /LD_LIBRARY_PATH=\/opt\/llmc\/lib/.test(t)));
    }
  });
}
