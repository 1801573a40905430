// Plugin calls exactly as LobeChat makes them, through LobeChat's own gateway package.
//
// LobeChat's browser (src/services/chat.ts `runPluginApi`) POSTs
// `JSON.stringify({...params, manifest})` with `createHeadersWithPluginSettings(settings)` to its
// server route (src/app/(backend)/webapi/plugin/gateway/route.ts), which hands the Request to
// `createGatewayOnEdgeRuntime({defaultPluginSettings, pluginsIndexUrl})`; that handler reads the
// settings header and runs `Gateway.execute(payload, settings)`: it validates the payload and the
// manifest with the SDK's zod schemas, the settings against `manifest.settings` and the parsed
// arguments against `api.parameters` (@cfworker/json-schema), then POSTs the raw argument string
// to `api.url` with the settings header. This script builds those same Requests and calls the
// same handler, so every check LobeChat's server makes runs here.
//
// Usage: node gateway_calls.mjs <input JSON path> <output JSON path>
//   input:  {"manifestUrl": "...", "defaultPluginSettings": {...}?, "calls": [
//             {"id": "...", "apiName": "...", "arguments"?: "<raw string>", "settings"?: <any>,
//              "defaultPluginSettings"?: {...}}]}
//           A call without "arguments" sends none; without "settings" the browser's store has no
//           settings for the plugin (the SDK then writes the header value "undefined").
//           "defaultPluginSettings" plays LobeChat's PLUGIN_SETTINGS server variable
//           ({identifier: {key: value}}), for the whole run or for one call.
//   output: {"manifest": {...}, "results": [{"id", "status", "body", "ms"}]}
// Needs LOBECHAT_NODE_MODULES: the folder holding node_modules/@lobehub/* (scripts/test-deps/node.sh).
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.LOBECHAT_NODE_MODULES, 'package.json'));
const { createHeadersWithPluginSettings } = require('@lobehub/chat-plugin-sdk');
const { createGatewayOnEdgeRuntime } = require('@lobehub/chat-plugins-gateway');

// The gateway logs every call on stdout/stderr; keep the test output for results only.
console.info = () => {};
console.error = () => {};

const [inPath, outPath] = process.argv.slice(2);
const input = JSON.parse(readFileSync(inPath, 'utf8'));

// Install: LobeChat stores the manifest it fetched from the user's URL and sends it with every call.
const manifest = await (await fetch(input.manifestUrl)).json();

// LobeChat's route builds one handler at start-up; one per call lets a call carry its own defaults.
const gatewayFor = (defaults) => createGatewayOnEdgeRuntime({
  defaultPluginSettings: defaults ?? {},
  pluginsIndexUrl: 'http://127.0.0.1:9/unused-market-index', // never fetched: the manifest is sent
});

const results = [];
for (const call of input.calls) {
  const params = { apiName: call.apiName, identifier: manifest.identifier, type: manifest.type ?? 'default' };
  if ('arguments' in call) params.arguments = call.arguments;
  const headers = createHeadersWithPluginSettings('settings' in call ? call.settings : undefined, {
    'Content-Type': 'application/json',
  });
  const req = new Request('http://lobechat.local/webapi/plugin/gateway', {
    body: JSON.stringify({ ...params, manifest }),
    headers,
    method: 'POST',
  });
  const started = performance.now();
  const res = await gatewayFor(call.defaultPluginSettings ?? input.defaultPluginSettings)(req);
  const body = await res.text();
  results.push({ id: call.id, status: res.status, body, ms: Math.round(performance.now() - started) });
}

writeFileSync(outPath, JSON.stringify({ manifest, results }, null, 1));
