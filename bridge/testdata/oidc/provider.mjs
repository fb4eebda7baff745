// A real OpenID provider (the npm package oidc-provider) on loopback for
// the bridge's JWT tests: the client credentials grant with resource
// indicators issues JWT access tokens (RFC 9068) whose aud is the
// resource asked for. Started by bridge/oidc_test.go:
//
//   node provider.mjs [PORT]
//
// It prints one JSON line, {"issuer": "http://127.0.0.1:PORT"}, once it
// listens (PORT 0 or none picks a free one; a given PORT lets a test
// start it again at the same issuer), and serves besides the provider:
//
//   POST /control/rotate     a new signing key, listed first (the old one
//                            stays listed); ?drop=1 lists the new one only
//   POST /control/ttl?s=N    access tokens live N seconds from now on
//   GET  /control/stats      {"jwks": N, "discovery": N}: requests served
//
// Clients: bridge-ci (secret ci-secret) and other-client (secret
// other-secret), both client_secret_basic.
import http from "node:http";
import crypto from "node:crypto";
import Provider from "oidc-provider";

const port = Number(process.argv[2] || 0);
let ttl = 300;
const stats = { jwks: 0, discovery: 0 };
let keys = [newKey()];

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = privateKey.export({ format: "jwk" });
  return { ...jwk, kid: crypto.randomUUID(), alg: "ES256", use: "sig" };
}

function provider(issuer) {
  const p = new Provider(issuer, {
    clients: ["bridge-ci", "other-client"].map((id) => ({
      client_id: id,
      client_secret: id === "bridge-ci" ? "ci-secret" : "other-secret",
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: "client_secret_basic",
      id_token_signed_response_alg: "ES256",
    })),
    jwks: { keys },
    scopes: ["bridge:call"],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: "bridge:call",
          audience: resource,
          accessTokenTTL: ttl,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "ES256" } },
        }),
      },
    },
  });
  p.proxy = false;
  return p;
}

let current; // the provider's request handler, rebuilt when keys or ttl change
let issuer;
const server = http.createServer((req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname.startsWith("/control/")) {
    control(req, res, url);
    return;
  }
  if (url.pathname === "/jwks") stats.jwks++;
  if (url.pathname === "/.well-known/openid-configuration") stats.discovery++;
  current(req, res);
});

function control(req, res, url) {
  const reply = (code, body) => {
    res.writeHead(code, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  switch (`${req.method} ${url.pathname}`) {
    case "POST /control/rotate": {
      const key = newKey();
      keys = url.searchParams.get("drop") ? [key] : [key, ...keys];
      current = provider(issuer).callback();
      return reply(200, { kid: key.kid, kids: keys.map((k) => k.kid) });
    }
    case "POST /control/ttl":
      ttl = Number(url.searchParams.get("s"));
      current = provider(issuer).callback();
      return reply(200, { ttl });
    case "GET /control/stats":
      return reply(200, stats);
  }
  reply(404, { error: "no such control" });
}

server.listen(port, "127.0.0.1", () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  current = provider(issuer).callback();
  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
