// deploy/ against the Kubernetes schemas and against what `omnirt serve` offers (checks.mjs), and
// proof that the checks fail: each mutation below breaks one thing the runtime relies on and must
// be reported.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
    checkKustomizations,
    checkRuntime,
    checkSchemas,
    loadManifests,
    plannedFlags,
    serveGetRoutes,
    serveInterface,
} from "./checks.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const deployDir = process.env.OMNIRT_DEPLOY_DIR ?? path.join(repoRoot, "deploy");

const context = {
    server: serveInterface(repoRoot),
    routes: serveGetRoutes(repoRoot),
    planned: plannedFlags(repoRoot),
};

const report = (problems) => problems.map((p) => `  - ${p}`).join("\n");

test("the sources are read: serve flags, GET routes, planned flags", () => {
    for (const flag of ["--host", "--port", "--config", "--model-path", "--drain-timeout"]) {
        assert.equal(context.server.flags[flag], "option", flag);
    }
    assert.equal(context.server.flags["--demo"], "flag");
    assert.ok(context.server.envNames.includes("OMNIRT_API_KEY"));
    assert.ok(context.routes.has("/health") && context.routes.has("/metrics"));
    for (const flag of ["--nnodes", "--node-rank", "--dist-init-addr", "--node-addr"]) {
        assert.equal(context.server.flags[flag], "option", flag);
    }
});

test("deploy/ has both layouts", () => {
    const files = loadManifests(deployDir).map((m) => m.file);
    for (const file of ["single-node/deployment.yaml", "single-node/service.yaml",
                        "multi-node/statefulset.yaml", "multi-node/service-headless.yaml"]) {
        assert.ok(files.includes(file), `${file} is missing`);
    }
});

test("every object is valid against the Kubernetes schemas", async () => {
    const problems = await checkSchemas(loadManifests(deployDir));
    assert.deepEqual(problems, [], `schema problems:\n${report(problems)}`);
});

test("kustomizations list exactly their directory's files", () => {
    const problems = checkKustomizations(loadManifests(deployDir));
    assert.deepEqual(problems, [], report(problems));
});

test("the manifests use what omnirt serve offers", () => {
    const problems = checkRuntime(loadManifests(deployDir), context);
    assert.deepEqual(problems, [], `runtime problems:\n${report(problems)}`);
});

test("no manifest is marked as not usable yet (both layouts run)", () => {
    for (const manifest of loadManifests(deployDir)) assert.ok(!manifest.planned, manifest.file);
});

// ---- the checks fail when they should ----

function mutated(file, edit) {
    const manifests = structuredClone(loadManifests(deployDir));
    const manifest = manifests.find((m) => m.file === file);
    assert.ok(manifest, file);
    edit(manifest.objects.find((o) => o.kind !== "Kustomization" && o.spec?.template) ??
             manifest.objects[0],
         manifest);
    return manifests;
}

const container = (workload) => workload.spec.template.spec.containers[0];

function expectProblem(manifests, pattern) {
    const problems = checkRuntime(manifests, context);
    assert.ok(problems.some((p) => pattern.test(p)),
              `expected a problem matching ${pattern}, got:\n${report(problems)}`);
}

test("fails on a flag omnirt serve does not have", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => container(d).args.push("--max-batch", "8")),
                  /--max-batch is not a flag of omnirt serve/);
});

test("fails on a planned flag outside the planned files", () => {
    // docs/deploy.md lists no planned flag today: check with one made up.
    const manifests = mutated("single-node/deployment.yaml",
                              (d) => container(d).args.push("--future-flag", "2"));
    const problems = checkRuntime(manifests, { ...context, planned: new Set(["--future-flag"]) });
    assert.ok(problems.some((p) => /--future-flag is not implemented yet/.test(p)),
              `expected the planned flag to be reported, got:\n${report(problems)}`);
});

test("fails when a planned flag exists in omnirt serve", () => {
    const problems = checkRuntime(loadManifests(deployDir),
                                  { ...context, planned: new Set(["--nnodes"]) });
    assert.ok(problems.some((p) => /lists --nnodes as not yet implemented/.test(p)),
              report(problems));
});

test("fails on an option without its value", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => container(d).args.push("--drain-timeout")),
                  /--drain-timeout needs a value/);
});

test("fails on a wrong probe path", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => { container(d).readinessProbe.httpGet.path = "/healthz"; }),
                  /readinessProbe\.httpGet\.path is "\/healthz"/);
    expectProblem(mutated("multi-node/statefulset.yaml",
                          (s) => { container(s).livenessProbe.httpGet.path = "/ready"; }),
                  /livenessProbe\.httpGet\.path is "\/ready"/);
    // Liveness on /health would kill the pod in the middle of a stage restart.
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => { container(d).livenessProbe.httpGet.path = "/health"; }),
                  /livenessProbe\.httpGet\.path is "\/health"; the server's endpoint for it is \/health\/live/);
});

test("fails on a probe port that is not the server's", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => { container(d).livenessProbe.httpGet.port = 9000; }),
                  /livenessProbe\.httpGet\.port 9000/);
});

test("fails on a missing probe", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => { delete container(d).startupProbe; }),
                  /no startupProbe/);
});

test("fails when --port and the container port disagree", () => {
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        const args = container(d).args;
        args[args.indexOf("--port") + 1] = "8080";
    }), /no containerPort is the server's --port 8080/);
});

test("fails without the in-memory /dev/shm", () => {
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        d.spec.template.spec.volumes.find((v) => v.name === "dshm").emptyDir = {};
    }), /\/dev\/shm must be an emptyDir with medium: Memory/);
});

test("fails when the grace period does not cover the drain", () => {
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        d.spec.template.spec.terminationGracePeriodSeconds = 30;
    }), /terminationGracePeriodSeconds 30 must exceed/);
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        const args = container(d).args;
        args[args.indexOf("--drain-timeout") + 1] = "120";
    }), /--drain-timeout \(120 s\)/);
});

test("fails on a scrape annotation that is not /metrics", () => {
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        d.spec.template.metadata.annotations["prometheus.io/path"] = "/stats";
    }), /prometheus\.io\/path is "\/stats"/);
});

test("fails on a Service whose targetPort is no container port", () => {
    expectProblem(mutated("single-node/service.yaml",
                          (s) => { s.spec.ports[0].targetPort = 8080; }),
                  /targetPort 8080 is no containerPort/);
});

test("fails on the API key in args or not from a Secret", () => {
    expectProblem(mutated("single-node/deployment.yaml",
                          (d) => container(d).args.push("--api-key", "secret")),
                  /--api-key in args/);
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        container(d).env = [{ name: "OMNIRT_API_KEY", value: "secret" }];
    }), /OMNIRT_API_KEY must come from a Secret/);
});

test("fails on a --config that no ConfigMap key provides", () => {
    expectProblem(mutated("single-node/deployment.yaml", (d) => {
        const args = container(d).args;
        args[args.indexOf("--config") + 1] = "/etc/omnirt/other.yaml";
    }), /has no key other\.yaml/);
});

test("the schema check fails on a wrong type and a missing required field", async () => {
    const wrongType = mutated("single-node/deployment.yaml", (d) => { d.spec.replicas = "one"; });
    assert.match((await checkSchemas(wrongType)).join("\n"), /spec\/replicas must be integer/);
    const noPort = mutated("single-node/deployment.yaml",
                           (d) => { delete container(d).readinessProbe.httpGet.port; });
    assert.match((await checkSchemas(noPort)).join("\n"),
                 /httpGet must have required property port/);
});

test("the schema check fails on a misspelt field", async () => {
    const misspelt = mutated("single-node/deployment.yaml", (d) => {
        container(d).readinesProbe = container(d).readinessProbe;
        d.spec.template.spec.volumes.find((v) => v.name === "dshm").emptyDir.medum = "Memory";
    });
    const problems = (await checkSchemas(misspelt)).join("\n");
    assert.match(problems, /containers\[0\]: unknown field "readinesProbe"/);
    assert.match(problems, /volumes\[2\]\.emptyDir: unknown field "medum"/);
});
