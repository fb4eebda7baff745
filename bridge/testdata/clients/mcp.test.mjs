// The official MCP TypeScript SDK (@modelcontextprotocol/sdk) against the
// bridge's MCP tools: its Client over StreamableHTTPClientTransport
// (MCP_URL, MCP_AUTH_URL, MCP_CHANGE_URL) and over StdioClientTransport,
// spawning MCP_BIN mcp --backend MCP_BACKEND. Run by TestNodeMCPClients
// (bridge/mcp_node_test.go), which sets these variables.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} is not set: run these tests with go test -run TestNodeMCPClients ./bridge`);
  return v;
};
const url = env("MCP_URL");
const authURL = env("MCP_AUTH_URL");
const changeURL = env("MCP_CHANGE_URL");
const controlURL = env("MCP_CONTROL_URL");
const bin = env("MCP_BIN");
const backend = env("MCP_BACKEND");

async function httpClient(endpoint, token) {
  const client = new Client({ name: "bridge-ts-test", version: "1.0.0" });
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit }));
  return client;
}

async function stdioClient() {
  const client = new Client({ name: "bridge-ts-stdio-test", version: "1.0.0" });
  const transport = new StdioClientTransport({ command: bin, args: ["mcp", "--backend", backend], stderr: "pipe" });
  let stderr = "";
  transport.stderr.on("data", (b) => { stderr += b; });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");

// checks runs the same checks over any transport. lateProgressLost: the
// transport may deliver progress notifications in the same read as the
// result, and this SDK then drops them (typescript-sdk#2580): over stdio.
async function checks(client, lateProgressLost) {
  const info = client.getServerCapabilities();
  assert.equal(info.tools?.listChanged, true, "tools capability with listChanged");

  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const t of tools) assert.match(t.name, /^[a-zA-Z0-9_-]{1,64}$/);
  const echo = byName["test_v1_TestService_Echo"];
  assert.ok(echo, "Echo is a tool");
  assert.equal(echo.title, "test.v1.TestService.Echo");
  assert.equal(echo.inputSchema.type, "object");
  assert.equal(echo.outputSchema.type, "object");
  assert.ok(byName["test_v1_TestService_ServerStream"], "server streams are tools");
  assert.equal(byName["test_v1_TestService_ClientStream"], undefined, "client streams are left out");
  assert.equal(byName["test_v1_TestService_BidiStream"], undefined, "bidi streams are left out");

  // Success: structuredContent is the result, and the text its JSON. The
  // SDK validates structuredContent against outputSchema with ajv.
  const hello = await client.callTool({ name: "helloworld_Greeter_SayHello", arguments: { name: "TypeScript" } });
  assert.equal(hello.isError, undefined);
  assert.deepEqual(hello.structuredContent, { message: "Hello, TypeScript!" });
  assert.deepEqual(JSON.parse(text(hello)), hello.structuredContent);
  const all = await client.callTool({ name: "test_v1_TestService_Echo", arguments: { fString: "s", fInt64: "9007199254740993", fBool: true } });
  assert.equal(all.isError, undefined, text(all));
  assert.equal(all.structuredContent.fInt64, "9007199254740993");

  // A gRPC error: isError, the status named.
  const fail = await client.callTool({ name: "test_v1_TestService_Fail", arguments: { code: 7, message: "not you" } });
  assert.equal(fail.isError, true);
  assert.match(text(fail), /^PERMISSION_DENIED \(gRPC code 7\): not you/);

  // Invalid arguments: the protocol's invalid params error, naming the field.
  await assert.rejects(
    client.callTool({ name: "test_v1_TestService_Echo", arguments: { fInt32: "not a number" } }),
    (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /fInt32/.test(e.message + JSON.stringify(e.data)),
  );

  // A server stream: every message in structuredContent, each one first
  // reported as progress.
  const progress = [];
  const stream = await client.callTool(
    { name: "test_v1_TestService_ServerStream", arguments: { count: 4 } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  assert.equal(stream.isError, undefined, text(stream));
  assert.deepEqual(stream.structuredContent, { messages: [{ seq: 1 }, { seq: 2 }, { seq: 3 }, { seq: 4 }] });
  const seen = progress.map((p) => p.progress);
  if (lateProgressLost) {
    assert.deepEqual(seen, [1, 2, 3, 4].slice(0, seen.length), "progress in order, some maybe dropped by the SDK");
  } else {
    assert.deepEqual(seen, [1, 2, 3, 4]);
    assert.match(progress[0].message, /"seq":1/);
  }

  // Progress arrives as the stream's messages do: this stream holds open
  // after its messages, and the call is cancelled once all were reported.
  const held = [];
  const abort = new AbortController();
  await assert.rejects(client.callTool(
    { name: "test_v1_TestService_ServerStream", arguments: { count: 3, hold: true } },
    undefined,
    { signal: abort.signal, onprogress: (p) => { held.push(p); if (held.length === 3) abort.abort(); } },
  ));
  assert.deepEqual(held.map((p) => p.progress), [1, 2, 3]);
  assert.deepEqual(held.map((p) => p.message), [1, 2, 3].map((i) => `message ${i}: {"seq":${i}}`));
}

test("Streamable HTTP: initialize, list, call, errors, invalid params, a stream with progress", async () => {
  const client = await httpClient(url);
  try {
    await checks(client);
  } finally {
    await client.close();
  }
});

test("stdio: the mcp command serves the same tools, logs on stderr only", async () => {
  const { client, stderr } = await stdioClient();
  try {
    await checks(client, true);
  } finally {
    await client.close();
  }
  assert.match(stderr(), /mcp: serving on stdio/);
});

test("Streamable HTTP: auth filters tools/list and refuses calls outside it", async () => {
  await assert.rejects(httpClient(authURL), "no credentials: no session");
  await assert.rejects(httpClient(authURL, "wrong-token-0123456789"), "a wrong token: no session");
  const greeter = await httpClient(authURL, "greeter-token-0123456789");
  const admin = await httpClient(authURL, "admin-token-0123456789");
  try {
    const names = (await greeter.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names, ["helloworld_Greeter_SayHello"]);
    const adminNames = (await admin.listTools()).tools.map((t) => t.name);
    assert.ok(adminNames.includes("test_v1_TestService_Count") && adminNames.length > names.length);
    const refused = await greeter.callTool({ name: "test_v1_TestService_Count", arguments: { key: "ts" } });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /^PERMISSION_DENIED \(gRPC code 7\)/);
    const ok = await greeter.callTool({ name: "helloworld_Greeter_SayHello", arguments: { name: "g" } });
    assert.equal(ok.isError, undefined);
  } finally {
    await greeter.close();
    await admin.close();
  }
});

test("Streamable HTTP: notifications/tools/list_changed after re-discovery", async () => {
  const client = await httpClient(changeURL);
  try {
    const before = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(before, ["helloworld_Greeter_SayHello"]);
    const changed = new Promise((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, resolve));
    const res = await fetch(controlURL + "/rediscover", { method: "POST" });
    assert.equal(res.status, 204);
    await changed;
    const after = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(after.includes("test_v1_TestService_Echo") && after.includes("helloworld_Greeter_SayHello"), after.join(","));
  } finally {
    await client.close();
  }
});
