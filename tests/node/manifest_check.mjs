// Install step as LobeChat's browser does it: fetch the manifest cross-origin, answer the CORS
// preflight, and validate the body with the SDK's own `pluginManifestSchema` (zod).
//
// Usage: node manifest_check.mjs <manifest URL> <output JSON path>
// Needs LOBECHAT_NODE_MODULES: the folder holding node_modules/@lobehub/* (scripts/test-deps/node.sh).
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.LOBECHAT_NODE_MODULES, 'package.json'));
const { pluginManifestSchema } = require('@lobehub/chat-plugin-sdk');

const [manifestUrl, outPath] = process.argv.slice(2);
const ORIGIN = 'http://lobechat.example:3210';

const corsOf = (res) => ({
  allowOrigin: res.headers.get('access-control-allow-origin'),
  allowMethods: res.headers.get('access-control-allow-methods'),
  allowHeaders: res.headers.get('access-control-allow-headers'),
});

// The preflight a browser sends before a cross-origin GET with a non-simple header.
const preflight = await fetch(manifestUrl, {
  method: 'OPTIONS',
  headers: {
    Origin: ORIGIN,
    'Access-Control-Request-Method': 'GET',
    'Access-Control-Request-Headers': 'content-type',
  },
});

const res = await fetch(manifestUrl, { headers: { Origin: ORIGIN, Accept: 'application/json' } });
const text = await res.text();
let manifest = null;
let parseError = null;
try {
  manifest = JSON.parse(text);
} catch (err) {
  parseError = String(err);
}
const parsed = manifest === null ? null : pluginManifestSchema.safeParse(manifest);

writeFileSync(outPath, JSON.stringify({
  preflight: { status: preflight.status, ...corsOf(preflight), body: await preflight.text() },
  get: { status: res.status, contentType: res.headers.get('content-type'), ...corsOf(res) },
  parseError,
  manifest,
  schema: parsed === null ? null : { success: parsed.success, issues: parsed.success ? [] : parsed.error.issues },
}, null, 1));
