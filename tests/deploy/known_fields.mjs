// Unknown fields: the kubernetes-models validators accept fields the Kubernetes API does not
// have (the API server drops or refuses them), so a misspelt `readinesProbe` would pass them.
// This walks each object along the field lists of the same package's type declarations
// (kubernetes-models/<group>/<version>/<Kind>.d.ts: `"field"?: Type;` per field) and reports every
// key no declaration has.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const nodeModules = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules");
const declarations = new Map();  // .d.ts path -> {fields: {name: type}, imports: {type: .d.ts}}

function resolveImport(fromFile, specifier) {
    const base = specifier.startsWith(".")
        ? path.resolve(path.dirname(fromFile), specifier)
        : path.join(nodeModules, specifier);
    return `${base}.d.ts`;
}

// The first interface of a declaration file: its fields and the files its type names come from.
function declaration(file) {
    if (declarations.has(file)) return declarations.get(file);
    let result = null;
    if (fs.existsSync(file)) {
        const lines = fs.readFileSync(file, "utf8").split("\n");
        const imports = {};
        for (const line of lines) {
            const match = line.match(/^import \{ (.+) \} from "(.+)";$/);
            if (match) {
                for (const name of match[1].split(",").map((s) => s.trim())) {
                    imports[name] = resolveImport(file, match[2]);
                }
            }
        }
        const start =
            lines.findIndex((l) => /^export interface I\w+( extends [\w, ]+)? \{$/.test(l));
        if (start >= 0) {
            const fields = {};
            for (let i = start + 1; i < lines.length && lines[i] !== "}"; ++i) {
                const match = lines[i].match(/^ {4}"([^"]+)"\??: (.*)$/);
                if (!match) continue;
                let type = match[2];
                if (type === "{") {
                    // A map: `{ [key: string]: T; }` over the next lines.
                    const inner = lines[i + 1].match(/^\s+\[key: string\]: (.*);$/);
                    type = inner ? `Map<${inner[1]}>` : "unknown";
                } else {
                    type = type.replace(/;$/, "");
                }
                fields[match[1]] = type;
            }
            result = { fields, imports };
        }
    }
    declarations.set(file, result);
    return result;
}

function walk(value, type, imports, at, problems) {
    if (value === null || typeof value !== "object") return;
    const array = type.match(/^Array<(.+)>$/);
    if (array) {
        if (Array.isArray(value)) {
            value.forEach((v, i) => walk(v, array[1], imports, `${at}[${i}]`, problems));
        }
        return;
    }
    const map = type.match(/^Map<(.+)>$/);
    if (map) {
        for (const [key, v] of Object.entries(value)) {
            walk(v, map[1], imports, `${at}.${key}`, problems);
        }
        return;
    }
    if (!imports[type]) return;  // a primitive, a union of literals, or a type outside the package
    const decl = declaration(imports[type]);
    if (!decl) return;  // a type alias (IntOrString, Quantity, Time, ...)
    checkObject(value, decl, at, problems);
}

function checkObject(value, decl, at, problems) {
    if (Array.isArray(value)) return;
    for (const [key, v] of Object.entries(value)) {
        if (!(key in decl.fields)) {
            const known = Object.keys(decl.fields).join(", ");
            problems.push(`${at}: unknown field "${key}" (known: ${known})`);
            continue;
        }
        walk(v, decl.fields[key], decl.imports, at ? `${at}.${key}` : key, problems);
    }
}

// The unknown fields of one object (apiVersion `group/version` or `version`, kind), or null when
// the package has no declaration for it.
export function unknownFields(object) {
    const decl = declaration(
        path.join(nodeModules, "kubernetes-models", object.apiVersion, `${object.kind}.d.ts`));
    if (!decl) return null;
    const problems = [];
    checkObject(object, decl, "", problems);
    return problems;
}
