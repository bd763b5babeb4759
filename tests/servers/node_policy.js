// The conformance matrix's small policy on Node.js's own `http` module (no packages):
// CreateContainer -> env TEAM from the pod label example.com/team, as the SDK example
// examples/label_env_policy.py answers it.
//
//   node node_policy.js --fd N [--idle SECONDS] [--close-always]
//
// Routes: /v1/policy (Content-Length), /chunked (two writes, chunked framing), /close
// (Connection: close), /interim (a 100 Continue and a 103 Early Hints before the reply).
// --idle sets server.keepAliveTimeout (Node's default: 5 s); --close-always ends every
// connection right after its reply without announcing it (no Connection: close header).
'use strict';
const http = require('http');

const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i < 0 ? undefined : args[i + 1]; };
const fd = Number(opt('--fd'));
const idle = opt('--idle');
const closeAlways = args.includes('--close-always');

function decide(body) {
  const event = JSON.parse(body);
  const team = ((event.pod || {}).labels || {})['example.com/team'];
  return JSON.stringify(team ? { adjust: { env: [{ key: 'TEAM', value: team }] } } : {});
}

const server = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    const reply = decide(Buffer.concat(parts).toString());
    res.setHeader('Content-Type', 'application/json');
    if (closeAlways) res.on('finish', () => req.socket.end());
    if (req.url === '/chunked') {
      res.write(reply.slice(0, 5));
      res.end(reply.slice(5));
      return;
    }
    if (req.url === '/interim') {
      res.writeContinue();
      res.writeEarlyHints({ link: '</x>; rel=preload' });
    }
    if (req.url === '/close') res.setHeader('Connection', 'close');
    res.setHeader('Content-Length', Buffer.byteLength(reply));
    res.end(reply);
  });
});
if (idle !== undefined) server.keepAliveTimeout = Number(idle) * 1000;
server.listen({ fd });
process.on('SIGTERM', () => process.exit(0));
