// kubernetes-models' validators accept fields the schema does not know (a typo such as `grcp:` for
// `grpc:` passes), while the API server's strict field validation rejects them. This walks an object
// along the TypeScript declarations the package ships and reports every field they do not declare.
import fs from 'node:fs';
import path from 'node:path';
import { requireTool } from './deploy_support.mjs';

const interfaces = new Map();

function declarationFile(specifier, fromFile) {
  if (specifier.startsWith('.')) return path.resolve(path.dirname(fromFile), `${specifier}.d.ts`);
  return requireTool.resolve(specifier).replace(/\.js$/, '.d.ts');
}

// The first interface of a declaration file: its fields and their type text, and where imported
// types are declared. null for files that declare only a type alias (IntOrString, Quantity, Time).
function readInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  const text = fs.readFileSync(file, 'utf8');
  const body = /^export interface \w+(?: extends [^{]+)? \{\n([\s\S]*?)\n\}/m.exec(text);
  let parsed = null;
  if (body) {
    const imports = new Map();
    for (const match of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
      for (const name of match[1].split(',')) imports.set(name.trim(), declarationFile(match[2], file));
    }
    const fields = new Map();
    for (const match of body[1].matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) fields.set(match[1], match[2]);
    parsed = { fields, imports };
  }
  interfaces.set(file, parsed);
  return parsed;
}

function walk(value, file, where, problems) {
  const declared = readInterface(file);
  if (!declared || value === null || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value)) {
    const type = declared.fields.get(key);
    if (type === undefined) {
      problems.push(`${where}.${key}: unknown field`);
      continue;
    }
    const element = /^Array<(\w+)>;$/.exec(type);
    const single = /^(\w+);$/.exec(type);
    const childFile = declared.imports.get(element ? element[1] : single ? single[1] : '');
    if (!childFile) continue;
    if (element && Array.isArray(child)) {
      child.forEach((item, i) => walk(item, childFile, `${where}.${key}[${i}]`, problems));
    } else if (!element) {
      walk(child, childFile, `${where}.${key}`, problems);
    }
  }
}

export function modelModule(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

// Every field of `object` that its kind's schema does not declare, as "Kind/name.path: unknown field".
export function unknownFields(object) {
  const problems = [];
  const file = requireTool.resolve(modelModule(object.apiVersion, object.kind)).replace(/\.js$/, '.d.ts');
  walk(object, file, `${object.kind}/${object.metadata?.name}`, problems);
  return problems;
}
