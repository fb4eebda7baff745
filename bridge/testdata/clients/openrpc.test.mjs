// @open-rpc/schema-utils-js against the documents running bridges serve
// (GET /openrpc.json): it parses, validates and dereferences them, and its
// MethodCallValidator (ajv underneath) validates calls of every method
// without throwing, accepting the params the bridge accepts and reporting
// the ones it refuses with -32602. BRIDGE_URL serves the demo services,
// BRIDGE_ALL_URL the test services too (every kind of field).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  parseOpenRPCDocument,
  validateOpenRPCDocument,
  dereferenceDocument,
  MethodCallValidator,
} from "@open-rpc/schema-utils-js";

const demoURL = process.env.BRIDGE_URL;
const allURL = process.env.BRIDGE_ALL_URL;
assert.ok(demoURL && allURL, "BRIDGE_URL or BRIDGE_ALL_URL is not set: run these tests with go test -run TestNodeClients ./bridge");

async function servedDocument(url) {
  const response = await fetch(new URL("openrpc.json", url));
  assert.equal(response.status, 200);
  return response.json();
}

// call makes a JSON-RPC call and returns the reply object.
async function call(url, method, params) {
  const body = { jsonrpc: "2.0", id: 1, method };
  if (params !== undefined) body.params = params;
  const response = await fetch(url, { method: "POST", body: JSON.stringify(body) });
  return response.json();
}

// The test services' document holds recursive messages (test.v1.Tree,
// whose children are Trees): the bridge describes them to a fixed depth,
// so the document has no $ref cycle, on which the dereferencer of
// schema-utils-js (@json-schema-tools/dereferencer 1.6.3) loops for ever.
test("the test services' document, recursive messages included, parses and dereferences as served", async () => {
  const raw = await servedDocument(allURL);
  assert.ok(raw.components.schemas["test.v1.Tree"], "no test.v1.Tree in the document");
  assert.equal(validateOpenRPCDocument(structuredClone(raw)), true);
  const deref = await dereferenceDocument(structuredClone(raw));
  assert.ok(deref.methods.length > 0);
  const parsed = await parseOpenRPCDocument(structuredClone(raw));
  assert.deepEqual(parsed.methods.map((m) => m.name), raw.methods.map((m) => m.name));
});

test("the demo document, as served, validates, parses and dereferences", async () => {
  const raw = await servedDocument(demoURL);
  assert.equal(validateOpenRPCDocument(structuredClone(raw)), true);
  const deref = await dereferenceDocument(structuredClone(raw));
  assert.ok(deref.methods.length > 0);
  const parsed = await parseOpenRPCDocument(structuredClone(raw));
  assert.deepEqual(parsed.methods.map((m) => m.name), raw.methods.map((m) => m.name));
  for (const m of parsed.methods) {
    for (const p of m.params) assert.equal(p.schema.$ref, undefined, `${m.name} param ${p.name} is not dereferenced`);
  }
});

// checkEveryMethod validates calls of every method of doc: null for every
// param compiles every param's schema, 64-bit fields included (ajv throws
// on a schema it does not accept).
function checkEveryMethod(doc) {
  const validator = new MethodCallValidator(doc);
  for (const m of doc.methods) {
    const byName = Object.fromEntries(m.params.map((p) => [p.name, null]));
    const byPosition = m.params.map(() => null);
    for (const params of [byName, byPosition, {}, []]) {
      let errors;
      assert.doesNotThrow(() => {
        errors = validator.validate(m.name, params);
      }, `${m.name} ${JSON.stringify(params)}`);
      assert.ok(Array.isArray(errors), `${m.name}: ${errors}`);
    }
  }
}

test("MethodCallValidator validates calls of every demo method without throwing", async () => {
  const doc = await parseOpenRPCDocument(await servedDocument(demoURL));
  const methods = doc.methods.map((m) => m.name);
  for (const name of ["demo.v1.Notes.CreateNote", "demo.v1.Notes.ImportNotes", "helloworld.Greeter.SayHello"]) {
    assert.ok(methods.includes(name), `the document lacks ${name}`);
  }
  checkEveryMethod(doc);
});

test("MethodCallValidator validates calls of every method of every test service without throwing", async () => {
  const doc = await parseOpenRPCDocument(await servedDocument(allURL));
  assert.ok(doc.methods.some((m) => m.name === "test.v1.TestService.Echo"));
  checkEveryMethod(doc);
});

// Each sample is validated by the document and called on the bridge: the
// two must agree. MethodCallValidator checks the listed params only, so the
// samples leave out what it does not look at (unknown names, elements past
// the last param).
const samples = [
  // valid
  { method: "helloworld.Greeter.SayHello", params: ["Ada"], valid: true },
  { method: "helloworld.Greeter.SayHello", params: { name: "Ada" }, valid: true },
  { method: "helloworld.Greeter.SayHello", params: [], valid: true },
  { method: "demo.v1.Notes.CreateNote", params: { note: { title: "t", views: "9007199254740993", priority: "PRIORITY_HIGH" } }, valid: true },
  { method: "demo.v1.Notes.CreateNote", params: [{ title: "t", views: 12, createdAt: "2024-05-01T12:00:00Z", labels: { k: "v" } }], valid: true },
  { method: "demo.v1.Notes.ImportNotes", params: [{ note: { title: "a", views: "9223372036854775807" } }, { note: { title: "b" } }], valid: true },
  { method: "demo.v1.Notes.Increment", params: ["-9007199254740993"], valid: true },
  { method: "demo.v1.Notes.Increment", params: { delta: 9007199254740993 }, valid: true },
  { method: "demo.v1.Notes.ListNotes", params: [["intro"]], valid: true },
  { method: "demo.v1.Notes.TagNotes", params: [{ id: "n1", tag: "npm" }], valid: true },
  { method: "demo.v1.Notes.WatchNotes", params: [["intro"], false], valid: true },
  { method: "demo.v1.Notes.WatchNotes", params: [], valid: true },
  { method: "test.v1.TestService.Echo", params: { fInt64: "-9223372036854775808", fUint64: "18446744073709551615", fDouble: "NaN", fFloat: 1.5, fBytes: "AAE=" }, valid: true },
  { method: "test.v1.TestService.Echo", params: [1.5, -2, 3, "4", 5, "6"], valid: true },
  // invalid
  { method: "helloworld.Greeter.SayHello", params: [42], valid: false },
  { method: "helloworld.Greeter.SayHello", params: { name: true }, valid: false },
  { method: "demo.v1.Notes.CreateNote", params: { note: { title: "t", views: "many" } }, valid: false },
  { method: "demo.v1.Notes.CreateNote", params: [{ title: "t", priority: "PRIORITY_URGENT" }], valid: false },
  { method: "demo.v1.Notes.ImportNotes", params: [{ note: { title: "a", views: "1.5.2" } }], valid: false },
  { method: "demo.v1.Notes.Increment", params: ["five"], valid: false },
  { method: "demo.v1.Notes.Increment", params: { delta: 1.5 }, valid: false },
  { method: "demo.v1.Notes.GetNote", params: { id: 1 }, valid: false },
  { method: "demo.v1.Notes.WatchNotes", params: ["intro"], valid: false },
  { method: "test.v1.TestService.Echo", params: { fInt64: "x" }, valid: false },
  { method: "test.v1.TestService.Echo", params: [null, null, 2147483648], valid: false },
];

test("MethodCallValidator accepts what the bridge accepts and reports what it refuses", async () => {
  const validators = {
    [demoURL]: new MethodCallValidator(await parseOpenRPCDocument(await servedDocument(demoURL))),
    [allURL]: new MethodCallValidator(await parseOpenRPCDocument(await servedDocument(allURL))),
  };
  for (const s of samples) {
    const url = s.method.startsWith("test.") ? allURL : demoURL;
    const label = `${s.method} ${JSON.stringify(s.params)}`;
    const errors = validators[url].validate(s.method, s.params);
    assert.ok(Array.isArray(errors), `${label}: ${errors}`);
    assert.equal(errors.length === 0, s.valid, `${label}: the validator reports ${JSON.stringify(errors.map((e) => e.message))}`);
    const reply = await call(url, s.method, s.params);
    const refused = reply.error !== undefined && reply.error.code === -32602;
    assert.equal(!refused, s.valid, `${label}: the bridge answers ${JSON.stringify(reply)}`);
  }
});

test("64-bit fields keep their type without a format", async () => {
  const doc = await servedDocument(demoURL);
  const views = doc.components.schemas["demo.v1.Note"].properties.views;
  assert.equal(views.format, undefined);
  assert.equal(views.type, "string");
  assert.match(views.description, /\bint64\b/);
  assert.match("9007199254740993", new RegExp(views.pattern));
});

test("each method's -32602 example names one of its own params", async () => {
  const doc = await servedDocument(allURL);
  for (const m of doc.methods) {
    const e = m.errors[0];
    if (e.$ref !== undefined) {
      // the shared entry fits every method only without a data example
      assert.equal(e.$ref, "#/components/errors/INVALID_PARAMS");
      assert.equal(doc.components.errors.INVALID_PARAMS.data, undefined, `${m.name}: the shared -32602 entry has an example`);
      continue;
    }
    assert.equal(e.code, -32602);
    if (m["x-grpc-streaming"]?.clientStreaming) continue; // "[0]. ..." names a field of a request message
    const top = e.data.field.split(/[.[]/)[0];
    assert.ok(m.params.some((p) => p.name === top), `${m.name}: example names ${e.data.field}`);
  }
});
