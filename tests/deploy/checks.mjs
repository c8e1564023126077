// Checks of the Kubernetes manifests under deploy/: each function returns a list of problems
// (strings that name the file, the object and the field), empty when all is well. Two kinds:
//
// - schema: every object against the Kubernetes OpenAPI schemas as kubernetes-models ships them
//   (types, required fields, enums, formats), and against the field lists of its type
//   declarations for unknown (misspelt) fields, which those schemas let through
//   (known_fields.mjs).
// - runtime: what `omnirt serve` relies on, read from its sources rather than restated here: the
//   flags (add_option / add_flag in src/cli/serve_command.cpp and src/cli/serve_nodes.cpp), the
//   routes (add_route in src/serve/api/), the drain timeout's default.
//
// Files whose text holds the marker NOT USABLE YET are planned shapes: they may use the flags
// docs/deploy.md lists under "Not yet implemented", and nothing else may (none is listed today).
import fs from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";

import { unknownFields } from "./known_fields.mjs";

export const kPlannedMarker = "NOT USABLE YET";

// ---- what the server offers, read from its sources ----

// The flags of `omnirt serve`: {name: "option" | "flag"} (an option takes a value, a flag none),
// the environment variables options read (envname), and the default --drain-timeout.
export function serveInterface(repoRoot) {
    // serve_command.cpp declares the flags, serve_nodes.cpp those of several nodes.
    const file = path.join(repoRoot, "src/cli/serve_command.cpp");
    const text = ["src/cli/serve_command.cpp", "src/cli/serve_nodes.cpp"]
        .map((name) => fs.readFileSync(path.join(repoRoot, name), "utf8"))
        .join("\n");
    const flags = {};
    for (const match of text.matchAll(/add_(option|flag)\(\s*"(--[a-z0-9-]+)"/g)) {
        flags[match[2]] = match[1];
    }
    const envNames = [...text.matchAll(/envname\(\s*"([A-Z0-9_]+)"\s*\)/g)].map((m) => m[1]);
    const drain = text.match(/double\s+drain_timeout_s\s*=\s*([0-9.]+)\s*;/);
    if (Object.keys(flags).length === 0 || !drain) {
        throw new Error(`${file}: found no add_option / add_flag or no drain_timeout_s default; ` +
                        "update tests/deploy/checks.mjs to the file's new shape");
    }
    return { flags, envNames, defaultDrainTimeoutS: Number(drain[1]) };
}

// The GET routes of the API server: add_route("GET", "/path", ...) in src/serve/api/*.cpp.
export function serveGetRoutes(repoRoot) {
    const dir = path.join(repoRoot, "src/serve/api");
    const routes = new Set();
    for (const name of fs.readdirSync(dir).filter((n) => n.endsWith(".cpp"))) {
        const text = fs.readFileSync(path.join(dir, name), "utf8");
        for (const match of text.matchAll(/add_route\(\s*"GET"\s*,\s*"([^"]+)"/g)) {
            routes.add(match[1]);
        }
    }
    if (routes.size === 0) throw new Error(`${dir}: found no add_route("GET", ...)`);
    return routes;
}

// The flags docs/deploy.md lists under its "## Not yet implemented" heading: list items that
// start with `--name`.
export function plannedFlags(repoRoot) {
    const text = fs.readFileSync(path.join(repoRoot, "docs/deploy.md"), "utf8");
    const start = text.indexOf("\n## Not yet implemented");
    if (start < 0) return new Set();
    const end = text.indexOf("\n## ", start + 1);
    const section = text.slice(start, end < 0 ? undefined : end);
    return new Set([...section.matchAll(/^- `(--[a-z0-9-]+)/gm)].map((m) => m[1]));
}

// ---- the manifests ----

// Every YAML file under deployDir: [{file (relative to deployDir), dir, planned, objects}].
export function loadManifests(deployDir) {
    const out = [];
    const walk = (dir) => {
        for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
            const full = path.join(dir, entry.name);
            if (entry.isDirectory()) walk(full);
            else if (/\.ya?ml$/.test(entry.name)) {
                const text = fs.readFileSync(full, "utf8");
                const docs = parseAllDocuments(text);
                const objects = [];
                const errors = [];
                for (const doc of docs) {
                    for (const error of doc.errors) errors.push(error.message);
                    const value = doc.toJS();
                    if (value !== null && value !== undefined) objects.push(value);
                }
                out.push({
                    file: path.relative(deployDir, full),
                    dir: path.relative(deployDir, dir),
                    planned: text.includes(kPlannedMarker),
                    objects,
                    errors,
                });
            }
        }
    };
    walk(deployDir);
    return out.sort((a, b) => a.file.localeCompare(b.file));
}

const where = (manifest, object) =>
    `${manifest.file}: ${object?.kind ?? "?"} ${object?.metadata?.name ?? "?"}`;

// The kubernetes-models class of an object: apps/v1 Deployment ->
// kubernetes-models/apps/v1/Deployment.
async function modelClass(apiVersion, kind) {
    try {
        const module = await import(`kubernetes-models/${apiVersion}/${kind}`);
        return module[kind] ?? null;
    } catch {
        return null;
    }
}

export async function checkSchemas(manifests) {
    const problems = [];
    for (const manifest of manifests) {
        for (const error of manifest.errors) problems.push(`${manifest.file}: YAML: ${error}`);
        for (const object of manifest.objects) {
            if (object?.kind === "Kustomization") continue;  // checked by checkKustomizations
            if (typeof object?.apiVersion !== "string" || typeof object?.kind !== "string") {
                problems.push(`${where(manifest, object)}: no apiVersion / kind`);
                continue;
            }
            const Model = await modelClass(object.apiVersion, object.kind);
            if (!Model) {
                problems.push(`${where(manifest, object)}: ${object.apiVersion} ${object.kind} ` +
                              "is not a Kubernetes API type kubernetes-models knows");
                continue;
            }
            try {
                new Model(object).validate();
            } catch (error) {
                problems.push(`${where(manifest, object)}: schema: ${error.message}`);
            }
            const unknown = unknownFields(object);
            if (unknown === null) {
                problems.push(`${where(manifest, object)}: no type declaration to check fields`);
            }
            for (const problem of unknown ?? []) {
                problems.push(`${where(manifest, object)}: ${problem}`);
            }
        }
    }
    return problems;
}

// A kustomization lists exactly the other YAML files of its directory, and they exist.
export function checkKustomizations(manifests) {
    const problems = [];
    for (const manifest of manifests) {
        const kustomization = manifest.objects.find((o) => o?.kind === "Kustomization");
        if (!kustomization) continue;
        const listed = new Set(kustomization.resources ?? []);
        const present = manifests
            .filter((m) => m.dir === manifest.dir && m !== manifest)
            .map((m) => path.relative(manifest.dir, m.file));
        for (const name of listed) {
            if (!present.includes(name)) {
                problems.push(`${manifest.file}: resources lists ${name}, which is not there`);
            }
        }
        for (const name of present) {
            if (!listed.has(name)) problems.push(`${manifest.file}: resources omits ${name}`);
        }
    }
    return problems;
}

const kWorkloadKinds = new Set(["Deployment", "StatefulSet"]);

function labelsMatch(selector, labels) {
    return Object.entries(selector ?? {}).every(([key, value]) => labels?.[key] === value);
}

// The value that follows `name` in args (`--name value` or `--name=value`), or undefined.
function argValue(args, name) {
    for (let i = 0; i < args.length; ++i) {
        if (args[i] === name) return args[i + 1];
        if (String(args[i]).startsWith(`${name}=`)) return String(args[i]).slice(name.length + 1);
    }
    return undefined;
}

// A probe's or annotation's port (number, numeric string or port name) as a number.
function resolvePort(port, container) {
    if (typeof port === "number") return port;
    if (/^[0-9]+$/.test(String(port))) return Number(port);
    const named = (container.ports ?? []).find((p) => p.name === port);
    return named ? named.containerPort : undefined;
}

function checkArgs(container, at, server, planned, isPlannedFile, problems) {
    const args = (container.args ?? []).map(String);
    const command = (container.command ?? []).map(String);
    if (args[0] !== "serve") {
        problems.push(`${at}: args must start with the subcommand "serve" (the image's ` +
                      `entrypoint is omnirt), got ${JSON.stringify(args[0])}`);
    }
    if (command.length > 0 && !command.some((c) => c.endsWith("omnirt"))) {
        problems.push(`${at}: command ${JSON.stringify(command)} does not run omnirt`);
    }
    for (let i = 1; i < args.length; ++i) {
        const arg = args[i];
        if (!arg.startsWith("--")) {
            problems.push(`${at}: args[${i}] ${JSON.stringify(arg)} follows no option`);
            continue;
        }
        const name = arg.split("=")[0];
        const inlineValue = arg.includes("=");
        let kind = server.flags[name];
        if (!kind && planned.has(name)) {
            if (!isPlannedFile) {
                problems.push(`${at}: ${name} is not implemented yet (docs/deploy.md lists it ` +
                              `as planned); only files marked "${kPlannedMarker}" may use it`);
            }
            kind = "option";
        }
        if (!kind) {
            problems.push(`${at}: ${name} is not a flag of omnirt serve ` +
                          "(src/cli/serve_command.cpp), nor listed as planned in docs/deploy.md");
            if (!inlineValue && i + 1 < args.length && !args[i + 1].startsWith("--")) ++i;
            continue;
        }
        if (kind === "option" && !inlineValue) {
            if (i + 1 >= args.length || args[i + 1].startsWith("--")) {
                problems.push(`${at}: ${name} needs a value`);
            } else {
                ++i;
            }
        }
    }
    if (args.includes("--api-key") || args.some((a) => a.startsWith("--api-key="))) {
        problems.push(`${at}: --api-key in args puts the key in the process list; ` +
                      "set OMNIRT_API_KEY from a Secret instead");
    }
    return args;
}

function checkWorkload(manifest, object, context, problems) {
    const at = where(manifest, object);
    const { server, routes, planned } = context;
    const pod = object.spec?.template?.spec ?? {};
    const container = (pod.containers ?? []).find((c) => (c.args ?? [])[0] === "serve") ??
                      (pod.containers ?? [])[0];
    if (!container) {
        problems.push(`${at}: no container`);
        return;
    }
    const c = `${at}: container ${container.name}`;
    const args = checkArgs(container, c, server, planned, manifest.planned, problems);

    // Address and port.
    const host = argValue(args, "--host");
    if (host !== "0.0.0.0" && host !== "::") {
        problems.push(`${c}: --host must be 0.0.0.0 (or ::) for the kubelet's probes and the ` +
                      `Service to reach the server, got ${JSON.stringify(host)}`);
    }
    const port = Number(argValue(args, "--port") ?? 8000);
    const containerPorts = (container.ports ?? []).map((p) => p.containerPort);
    if (!containerPorts.includes(port)) {
        problems.push(`${c}: no containerPort is the server's --port ${port}`);
    }

    // Probes: GET /health on the server's port; liveness GET /health/live, which stays 200 while
    // a stage process is being restarted (docs/deploy.md).
    const probePaths = {startupProbe: "/health", readinessProbe: "/health",
                        livenessProbe: "/health/live"};
    for (const [kind, expected] of Object.entries(probePaths)) {
        if (!routes.has(expected)) problems.push(`src/serve/api: no GET ${expected} route any more`);
        const probe = container[kind];
        if (!probe) {
            problems.push(`${c}: no ${kind}`);
            continue;
        }
        const get = probe.httpGet;
        if (!get) {
            problems.push(`${c}: ${kind} must be an httpGet of ${expected}`);
            continue;
        }
        if (get.path !== expected) {
            problems.push(`${c}: ${kind}.httpGet.path is ${JSON.stringify(get.path)}; the ` +
                          `server's endpoint for it is ${expected}` +
                          (routes.has(get.path) ? "" : ` (${get.path} is no route of the server)`));
        }
        if (resolvePort(get.port, container) !== port) {
            problems.push(`${c}: ${kind}.httpGet.port ${JSON.stringify(get.port)} is not the ` +
                          `server's port ${port}`);
        }
    }

    // Prometheus scrape annotations: GET /metrics on the server's port.
    const annotations = object.spec?.template?.metadata?.annotations ?? {};
    if (annotations["prometheus.io/scrape"] !== "true") {
        problems.push(`${at}: pod annotation prometheus.io/scrape must be "true"`);
    }
    if (annotations["prometheus.io/path"] !== "/metrics" || !routes.has("/metrics")) {
        problems.push(`${at}: pod annotation prometheus.io/path is ` +
                      `${JSON.stringify(annotations["prometheus.io/path"])}; the server's ` +
                      "metrics are at /metrics");
    }
    if (Number(annotations["prometheus.io/port"]) !== port) {
        problems.push(`${at}: pod annotation prometheus.io/port ` +
                      `${JSON.stringify(annotations["prometheus.io/port"])} is not the server's ` +
                      `port ${port}`);
    }

    // Volumes: /dev/shm in memory; --config from a ConfigMap; --model-path from a claim.
    const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
    const claimTemplates = new Set(
        (object.spec?.volumeClaimTemplates ?? []).map((t) => t.metadata?.name));
    const mountOf = (file) =>
        (container.volumeMounts ?? [])
            .filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`))
            .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    const shm = (container.volumeMounts ?? []).find((m) => m.mountPath === "/dev/shm");
    if (!shm || volumes.get(shm.name)?.emptyDir?.medium !== "Memory") {
        problems.push(`${c}: /dev/shm must be an emptyDir with medium: Memory (the shm relay ` +
                      "needs more than the container's default 64 MiB)");
    }
    const configPath = argValue(args, "--config");
    if (configPath !== undefined) {
        const mount = mountOf(configPath);
        const volume = mount && volumes.get(mount.name);
        if (!volume?.configMap) {
            problems.push(`${c}: --config ${configPath} is not on a ConfigMap volume`);
        } else {
            const key = path.posix.relative(mount.mountPath, configPath);
            const map = context.objects.find(
                (o) => o.kind === "ConfigMap" && o.metadata?.name === volume.configMap.name);
            if (!map) {
                problems.push(
                    `${c}: ConfigMap ${volume.configMap.name} is not in ${manifest.dir}/`);
            } else if (!(key in (map.data ?? {}))) {
                problems.push(`${c}: ConfigMap ${volume.configMap.name} has no key ${key} ` +
                              `for --config ${configPath}`);
            }
        }
    }
    const modelPath = argValue(args, "--model-path");
    if (modelPath !== undefined) {
        const mount = mountOf(modelPath);
        if (!mount || !(volumes.get(mount.name)?.persistentVolumeClaim ||
                        claimTemplates.has(mount.name))) {
            problems.push(`${c}: --model-path ${modelPath} is not on a persistent volume`);
        }
    }

    // Drain: the kubelet's SIGKILL must come after the preStop hook and the drain.
    const drain = Number(argValue(args, "--drain-timeout") ?? server.defaultDrainTimeoutS);
    const preStop = container.lifecycle?.preStop?.exec?.command ?? [];
    const preStopSeconds = preStop[0] === "sleep" ? Number(preStop[1]) : 0;
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    if (!(grace > drain + preStopSeconds)) {
        problems.push(`${at}: terminationGracePeriodSeconds ${grace} must exceed the preStop ` +
                      `sleep (${preStopSeconds} s) + --drain-timeout (${drain} s)`);
    }

    // The API key from a Secret through the environment variable the server reads.
    const keyEnv = (container.env ?? []).find((e) => e.name === "OMNIRT_API_KEY");
    if (!server.envNames.includes("OMNIRT_API_KEY")) {
        problems.push("src/cli/serve_command.cpp: --api-key no longer reads OMNIRT_API_KEY");
    }
    if (!keyEnv?.valueFrom?.secretKeyRef?.name) {
        problems.push(`${c}: OMNIRT_API_KEY must come from a Secret (valueFrom.secretKeyRef)`);
    }

    // Resources.
    for (const section of ["requests", "limits"]) {
        for (const resource of ["cpu", "memory"]) {
            if (container.resources?.[section]?.[resource] === undefined) {
                problems.push(`${c}: resources.${section}.${resource} is not set`);
            }
        }
    }

    // A planned workload must say so in the file, and a real one must not need planned flags
    // (checked per flag above).
    const usesPlanned = args.some((a) => {
        const name = a.split("=")[0];
        return planned.has(name) && !server.flags[name];
    });
    if (usesPlanned && !manifest.planned) {
        problems.push(`${manifest.file}: uses planned flags but is not marked "${kPlannedMarker}"`);
    }
}

function checkService(manifest, object, context, problems) {
    const at = where(manifest, object);
    const spec = object.spec ?? {};
    const targets = context.objects.filter(
        (o) => kWorkloadKinds.has(o.kind) &&
               labelsMatch(
                   Object.fromEntries(Object.entries(spec.selector ?? {}).filter(
                       // Labels the StatefulSet controller adds to each pod.
                       ([key]) => !key.startsWith("statefulset.kubernetes.io/") &&
                                  !key.startsWith("apps.kubernetes.io/"))),
                   o.spec?.template?.metadata?.labels));
    if (targets.length === 0) {
        problems.push(`${at}: selector ${JSON.stringify(spec.selector)} matches no pod template ` +
                      `in ${manifest.dir}/`);
        return;
    }
    for (const workload of targets) {
        const containers = workload.spec?.template?.spec?.containers ?? [];
        for (const port of spec.ports ?? []) {
            const target = port.targetPort ?? port.port;
            const found = containers.some((container) =>
                (container.ports ?? []).some((p) =>
                    typeof target === "number" || /^[0-9]+$/.test(String(target))
                        ? p.containerPort === Number(target)
                        : p.name === target));
            if (!found) {
                problems.push(`${at}: port ${port.name ?? port.port} targetPort ` +
                              `${JSON.stringify(target)} is no containerPort of ` +
                              `${workload.kind} ${workload.metadata?.name}`);
            }
        }
        if (workload.kind === "StatefulSet" && spec.clusterIP === "None" &&
            workload.spec?.serviceName !== object.metadata?.name) {
            problems.push(`${at}: headless Service is not the StatefulSet's serviceName ` +
                          `(${workload.spec?.serviceName})`);
        }
    }
}

// The runtime checks over every directory of manifests.
export function checkRuntime(manifests, { server, routes, planned }) {
    const problems = [];
    for (const name of planned) {
        if (server.flags[name]) {
            problems.push(`docs/deploy.md lists ${name} as not yet implemented, but ` +
                          "omnirt serve has it now: update the docs and manifests");
        }
    }
    const byDir = new Map();
    for (const manifest of manifests) {
        if (!byDir.has(manifest.dir)) byDir.set(manifest.dir, []);
        byDir.get(manifest.dir).push(manifest);
    }
    for (const group of byDir.values()) {
        const objects = group.flatMap((m) => m.objects);
        const context = { server, routes, planned, objects };
        for (const manifest of group) {
            for (const object of manifest.objects) {
                if (kWorkloadKinds.has(object?.kind)) {
                    checkWorkload(manifest, object, context, problems);
                }
                if (object?.kind === "Service") checkService(manifest, object, context, problems);
            }
        }
    }
    return problems;
}
