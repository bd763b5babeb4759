#!/usr/bin/env node
// A policy service for nri-webhook-bridge in plain Node.js (no packages): JSON in, JSON out.
//
//   node server.js /tmp/team-policy.sock      # listen on a Unix socket
//   node server.js 127.0.0.1:8088             # or on TCP
//
// POST /v1/policies/team-env with the bridge's request envelope. For CreateContainer it copies
// the pod label "example.com/team" into the env var TEAM; a pod without the label gets a
// warning; every other event gets {} (no change). Anything that is not a request envelope gets
// 422 naming the field, as the contract asks.
"use strict";
const http = require("http");
const fs = require("fs");

const API_VERSION = "nri-webhook-bridge/v1";
const LABEL = "example.com/team";

function decide(req) {
  if (req.event !== "CreateContainer") return {};
  const labels = (req.pod && req.pod.labels) || {};
  const team = labels[LABEL];
  if (!team) return { warnings: [`pod ${req.pod.namespace}/${req.pod.name} has no ${LABEL}`] };
  return { adjust: { env: [{ key: "TEAM", value: team }] } };
}

function invalid(req) {
  if (typeof req !== "object" || req === null || Array.isArray(req)) return ["body", "expected an object"];
  if (req.api_version !== API_VERSION) return ["api_version", `expected ${API_VERSION}`];
  if (typeof req.event !== "string") return ["event", "expected a string"];
  if (req.event === "CreateContainer" && typeof req.pod !== "object") return ["pod", "required"];
  return null;
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/healthz") return send(res, 200, { status: "ok" });
  if (req.method !== "POST" || req.url !== "/v1/policies/team-env") return send(res, 404, { detail: "not found" });
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return send(res, 422, { detail: [{ loc: ["body"], msg: `invalid JSON: ${e.message}` }] });
    }
    const bad = invalid(body);
    if (bad) return send(res, 422, { detail: [{ loc: ["body", bad[0]], msg: bad[1] }] });
    send(res, 200, decide(body));
  });
});

const where = process.argv[2] || "/tmp/team-policy.sock";
if (where.includes("/")) {
  try { fs.unlinkSync(where); } catch (_) { /* not there */ }
  server.listen(where, () => { fs.chmodSync(where, 0o600); console.log(`listening on unix://${where}`); });
} else {
  const [host, port] = where.split(":");
  server.listen(Number(port), host, () => console.log(`listening on http://${where}`));
}
process.on("SIGTERM", () => server.close(() => process.exit(0)));
