// The MCP TypeScript SDK's Client over StreamableHTTPClientTransport
// against several bridge replicas behind a load balancer (MCP_URL): run
// by TestMCPReplicas (deploy/scaling_test.go). It initializes, lists the
// tools, makes 30 calls and calls a server-streaming tool with progress,
// then prints one JSON line: {"ok":true,...}, or {"ok":false,"error":...}
// at the first failure (what sessions behind round robin get).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.env.MCP_URL;
if (!url) {
  console.error("MCP_URL is not set: run with go test -run TestMCPReplicas ./deploy");
  process.exit(2);
}
const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");

const report = { ok: false, step: "initialize" };
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "bridge-replicas-test", version: "1.0.0" });
try {
  await client.connect(transport);
  report.sessionId = transport.sessionId ?? null;
  report.step = "tools/list";
  const { tools } = await client.listTools();
  report.tools = tools.length;
  if (!tools.some((t) => t.name === "test_v1_TestService_Echo")) throw new Error("no Echo tool");
  report.step = "calls";
  let calls = 0;
  for (let i = 0; i < 30; i++) {
    const r = await client.callTool({ name: "test_v1_TestService_Echo", arguments: { fString: `call ${i}` } });
    if (r.isError || r.structuredContent?.fString !== `call ${i}`) throw new Error(`call ${i}: ${text(r)}`);
    calls++;
  }
  report.calls = calls;
  report.step = "stream";
  const progress = [];
  const stream = await client.callTool(
    { name: "test_v1_TestService_ServerStream", arguments: { count: 4 } },
    undefined,
    { onprogress: (p) => progress.push(p.progress) },
  );
  if (stream.isError) throw new Error(`stream: ${text(stream)}`);
  if (stream.structuredContent?.messages?.length !== 4) throw new Error(`stream: ${JSON.stringify(stream.structuredContent)}`);
  if (JSON.stringify(progress) !== "[1,2,3,4]") throw new Error(`progress ${JSON.stringify(progress)}, want [1,2,3,4]`);
  report.progress = progress;
  report.ok = true;
  delete report.step;
} catch (e) {
  report.error = `${e?.name}: ${e?.message}`;
  if (e?.code !== undefined) report.code = e.code;
}
console.log(JSON.stringify(report));
await client.close().catch(() => {});
