// JSON-RPC clients from npm against a running bridge (BRIDGE_URL, the
// URL of POST /), in front of the demo services: @open-rpc/client-js and
// json-rpc-2.0, as their users call them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, RequestManager, HTTPTransport, JSONRPCError } from "@open-rpc/client-js";
import { JSONRPCClient, JSONRPCErrorException } from "json-rpc-2.0";

const url = process.env.BRIDGE_URL;
assert.ok(url, "BRIDGE_URL is not set: run these tests with go test -run TestNodeClients ./bridge");

// openRPCClient is an @open-rpc/client-js client over HTTP whose request
// bodies are kept in sent, to see what it puts on the wire.
function openRPCClient() {
  const sent = [];
  const fetcher = (input, init) => {
    sent.push(JSON.parse(init.body));
    return fetch(input, init);
  };
  const client = new Client(new RequestManager([new HTTPTransport(url, { fetcher })]));
  return { client, sent };
}

test("@open-rpc/client-js: a call without params sends params [] and works", async () => {
  const { client, sent } = openRPCClient();
  const hello = await client.request({ method: "helloworld.Greeter.SayHello" });
  assert.deepEqual(hello, { message: "Hello, world!" });
  assert.deepEqual(sent[0].params, []);
  const counter = await client.request({ method: "demo.v1.Notes.GetCounter" });
  assert.equal(typeof counter, "object");
  // a server stream too: [] is its empty request, the result every message
  const notes = await client.request({ method: "demo.v1.Notes.WatchNotes" });
  assert.deepEqual(sent[2].params, []);
  assert.ok(notes.some((n) => n.id === "n1"), JSON.stringify(notes));
});

test("@open-rpc/client-js: params by position and by name", async () => {
  const { client } = openRPCClient();
  assert.deepEqual(await client.request({ method: "helloworld.Greeter.SayHello", params: ["Ada"] }), { message: "Hello, Ada!" });
  assert.deepEqual(await client.request({ method: "helloworld.Greeter.SayHello", params: { name: "Grace" } }), { message: "Hello, Grace!" });
  const note = await client.request({ method: "demo.v1.Notes.CreateNote", params: [{ title: "from client-js", tags: ["npm"] }] });
  assert.equal(note.title, "from client-js");
  const got = await client.request({ method: "demo.v1.Notes.GetNote", params: [note.id] });
  assert.equal(got.id, note.id);
  const listed = await client.request({ method: "demo.v1.Notes.ListNotes", params: [["npm"]] });
  assert.ok(listed.notes.some((n) => n.id === note.id));
  // a server stream takes its one request by position, as a unary method
  const watched = await client.request({ method: "demo.v1.Notes.WatchNotes", params: [["intro"], false] });
  assert.deepEqual(watched.map((n) => n.id), ["n1"]);
  // a client stream takes the array of its request messages
  const imported = await client.request({ method: "demo.v1.Notes.ImportNotes", params: [{ note: { title: "a" } }, { note: { title: "b" } }] });
  assert.equal(imported.count, "2");
});

test("@open-rpc/client-js: errors keep code, message and data", async () => {
  const { client } = openRPCClient();
  await assert.rejects(client.request({ method: "demo.v1.Notes.GetNote", params: ["nope"] }), (err) => {
    assert.ok(err instanceof JSONRPCError);
    assert.equal(err.code, 5);
    assert.equal(err.message, 'note "nope" not found');
    assert.equal(err.data.status, "NOT_FOUND");
    assert.equal(err.data.details[0].reason, "NOTE_NOT_FOUND");
    return true;
  });
  await assert.rejects(client.request({ method: "helloworld.Greeter.SayHello", params: [42] }), (err) => {
    assert.equal(err.code, -32602);
    assert.equal(err.message, "Invalid params: position 0 (name): want a string, got number");
    assert.deepEqual(err.data, { position: 0, field: "name", reason: "want a string, got number" });
    return true;
  });
  await assert.rejects(client.request({ method: "helloworld.Greeter.SayHello", params: ["Ada", "Grace"] }), (err) => {
    assert.equal(err.code, -32602);
    assert.equal(err.data.position, 1);
    return true;
  });
});

test("@open-rpc/client-js: a notification gets no reply and is made", async () => {
  const { client } = openRPCClient();
  const before = await client.request({ method: "demo.v1.Notes.GetCounter" });
  await client.notify({ method: "demo.v1.Notes.Increment", params: [4] });
  const after = await client.request({ method: "demo.v1.Notes.GetCounter" });
  assert.equal(BigInt(after.value ?? 0) - BigInt(before.value ?? 0), 4n);
});

// jsonRPC2Client is a json-rpc-2.0 client over fetch.
function jsonRPC2Client() {
  const client = new JSONRPCClient(async (request) => {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) });
    if (response.status === 200) {
      client.receive(await response.json());
    } else if (response.status !== 204) {
      throw new Error(`HTTP ${response.status}`);
    }
  });
  return client;
}

test("json-rpc-2.0: by name, by position, without params", async () => {
  const client = jsonRPC2Client();
  assert.deepEqual(await client.request("helloworld.Greeter.SayHello", { name: "Ada" }), { message: "Hello, Ada!" });
  assert.deepEqual(await client.request("helloworld.Greeter.SayHello", ["Grace"]), { message: "Hello, Grace!" });
  assert.deepEqual(await client.request("helloworld.Greeter.SayHello"), { message: "Hello, world!" });
  // 2^53 + 1 survives as a string, both ways
  const before = await client.request("demo.v1.Notes.GetCounter");
  const up = await client.request("demo.v1.Notes.Increment", ["9007199254740993"]);
  assert.equal(BigInt(up.value) - BigInt(before.value ?? 0), 9007199254740993n);
  await client.request("demo.v1.Notes.Increment", { delta: "-9007199254740993" });
});

test("json-rpc-2.0: a batch with results and errors", async () => {
  const client = jsonRPC2Client();
  const replies = await client.requestAdvanced([
    { jsonrpc: "2.0", id: 1, method: "helloworld.Greeter.SayHello", params: ["Ada"] },
    { jsonrpc: "2.0", id: 2, method: "demo.v1.Notes.GetNote", params: { id: "nope" } },
    { jsonrpc: "2.0", id: 3, method: "helloworld.Greeter.SayHello", params: [true] },
    { jsonrpc: "2.0", id: 4, method: "no.Such.Method" },
  ]);
  const byId = Object.fromEntries(replies.map((r) => [r.id, r]));
  assert.deepEqual(byId[1].result, { message: "Hello, Ada!" });
  assert.equal(byId[2].error.code, 5);
  assert.equal(byId[3].error.code, -32602);
  assert.equal(byId[3].error.data.field, "name");
  assert.equal(byId[4].error.code, -32601);
});

test("json-rpc-2.0: errors become JSONRPCErrorException", async () => {
  const client = jsonRPC2Client();
  await assert.rejects(client.request("demo.v1.Notes.CreateNote", [{ body: "no title" }]), (err) => {
    assert.ok(err instanceof JSONRPCErrorException);
    assert.equal(err.code, 3);
    assert.equal(err.data.status, "INVALID_ARGUMENT");
    return true;
  });
});
