// The official MCP TypeScript SDK's Client over Streamable HTTP with a
// bearer token from a real OpenID provider (MCP_TOKEN) against the
// bridge's /mcp (MCP_URL): it lists the tools and calls SayHello, then
// checks that without the token the bridge answers 401 naming its
// protected resource metadata, as MCP's authorization asks. Run by
// TestOIDCProvider (bridge/oidc_test.go).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.env.MCP_URL;
const token = process.env.MCP_TOKEN;
assert.ok(url && token, "MCP_URL and MCP_TOKEN are set by TestOIDCProvider");

test("tools with a bearer token from the provider", async () => {
  const client = new Client({ name: "bridge-oidc-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === "helloworld_Greeter_SayHello"), "SayHello is a tool");
  const r = await client.callTool({ name: "helloworld_Greeter_SayHello", arguments: { name: "oidc" } });
  assert.notEqual(r.isError, true, JSON.stringify(r));
  assert.match(r.content.map((c) => c.text).join(""), /oidc/);
  await client.close();
});

test("a 401 names the protected resource metadata", async () => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });
  assert.equal(res.status, 401);
  const challenge = res.headers.get("www-authenticate");
  const m = /resource_metadata="([^"]+)"/.exec(challenge);
  assert.ok(m, challenge);
  const meta = await (await fetch(m[1])).json();
  assert.ok(Array.isArray(meta.authorization_servers) && meta.authorization_servers.length === 1, JSON.stringify(meta));
  assert.deepEqual(meta.bearer_methods_supported, ["header"]);
});
