// The API explorer of grpc-jsonrpc-bridge: plain JavaScript, no
// dependencies, nothing fetched from anywhere but the bridge that served
// it. See docs/explorer.md; the data-role and data-method attributes are
// the page's stable hooks.
"use strict";

// ---- JSON with positions ------------------------------------------------

// Num is a JSON number as written: raw keeps the digits that a double
// would round (64-bit integers).
class Num {
  constructor(raw) { this.raw = raw; this.value = Number(raw); }
}

// parseJSON parses text into values whose numbers are Nums, and records
// where each value is: spans maps a path ("note.title", "[0].id") to
// {start, end} offsets of its key (or value) and value. A syntax error
// throws {message, at}.
function parseJSON(text) {
  let i = 0;
  const spans = new Map();
  const fail = (msg) => { throw { message: msg + " at line " + lineOf(text, i), at: i }; };
  const ws = () => { while (i < text.length && " \t\r\n".includes(text[i])) i++; };
  function str() {
    const start = i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === "\\") i++;
      else if (text.charCodeAt(i) < 0x20) fail("a control character in a string");
      i++;
    }
    if (i >= text.length) fail("an unterminated string");
    i++;
    try { return JSON.parse(text.slice(start, i)); } catch (e) { i = start; fail("a bad escape in a string"); }
  }
  function value(path, keyStart) {
    ws();
    const start = i;
    let v;
    const c = text[i];
    if (c === "{") {
      i++; v = {}; ws();
      if (text[i] === "}") i++;
      else for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a member name in quotes");
        const ks = i;
        const k = str();
        ws();
        if (text[i] !== ":") fail("expected ':' after a member name");
        i++;
        if (Object.prototype.hasOwnProperty.call(v, k)) fail("the member " + JSON.stringify(k) + " twice");
        v[k] = value(joinPath(path, k), ks);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; break; }
        fail("expected ',' or '}'");
      }
    } else if (c === "[") {
      i++; v = []; ws();
      if (text[i] === "]") i++;
      else for (let n = 0; ; n++) {
        v.push(value(path + "[" + n + "]"));
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; break; }
        fail("expected ',' or ']'");
      }
    } else if (c === '"') {
      v = str();
    } else {
      const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
      if (m && m[0] !== "" && m[0] !== "-") { i += m[0].length; v = new Num(m[0]); }
      else if (text.startsWith("true", i)) { i += 4; v = true; }
      else if (text.startsWith("false", i)) { i += 5; v = false; }
      else if (text.startsWith("null", i)) { i += 4; v = null; }
      else fail(i >= text.length ? "unexpected end of the text" : "unexpected " + JSON.stringify(text[i]));
    }
    spans.set(path, { start: keyStart === undefined ? start : keyStart, end: i });
    return v;
  }
  const v = value("");
  ws();
  if (i < text.length) fail("text after the JSON value");
  return { value: v, spans };
}

function lineOf(text, at) { return text.slice(0, at).split("\n").length; }

function joinPath(path, key) {
  const k = /^[A-Za-z_@][A-Za-z0-9_@]*$/.test(key) ? key : JSON.stringify(key);
  return path === "" ? k : path + "." + k;
}

// ---- Schemas --------------------------------------------------------------

// The schemas of a document: $refs resolve into it.
class Schemas {
  constructor(doc) { this.doc = doc || {}; }
  resolve(ref) {
    if (typeof ref !== "string" || !ref.startsWith("#/")) return {};
    let v = this.doc;
    for (const part of ref.slice(2).split("/")) {
      const k = part.replace(/~1/g, "/").replace(/~0/g, "~");
      if (v === null || typeof v !== "object" || !(k in v)) return {};
      v = v[k];
    }
    return v;
  }
  // deref follows $refs to a schema that is not one.
  deref(s) {
    for (let n = 0; s && s.$ref && n < 32; n++) s = this.resolve(s.$ref);
    return s || {};
  }
}

const bigBounds = new Map([
  [9223372036854775807, 9223372036854775807n],
  [-9223372036854775808, -9223372036854775808n],
  [18446744073709551615, 18446744073709551615n],
]);

// exactBound is a schema's numeric bound as a BigInt when it is an
// integer: the document's 64-bit bounds do not survive JSON.parse as
// doubles, so they are restored.
function exactBound(n) {
  if (bigBounds.has(n)) return bigBounds.get(n);
  return Number.isInteger(n) ? BigInt(n) : null;
}

function typesOf(s) {
  if (s.type === undefined) return null;
  return Array.isArray(s.type) ? s.type : [s.type];
}

function jsonType(v) {
  if (v === null) return "null";
  if (v instanceof Num) return "number";
  if (Array.isArray(v)) return "array";
  return typeof v; // string, boolean, object
}

function isIntegral(n) {
  return /^-?[0-9]+$/.test(n.raw) || Number.isInteger(n.value);
}

function typeMatches(t, v) {
  const jt = jsonType(v);
  if (t === "integer") return jt === "number" && isIntegral(v);
  return t === jt;
}

// plain turns parsed values back into ordinary ones (Nums become
// numbers), for display.
function plain(v) {
  if (v instanceof Num) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v)) o[k] = plain(v[k]);
    return o;
  }
  return v;
}

function deepEqual(a, b) {
  return JSON.stringify(plain(a)) === JSON.stringify(plain(b));
}

const typeWords = { object: "an object", array: "an array", string: "a string", number: "a number", integer: "an integer", boolean: "a boolean", null: "null" };

// validate checks v against schema s (JSON Schema draft-07, the keywords
// the bridge's documents use) and appends {path, message} to errors.
function validate(schemas, s, v, path, errors, depth) {
  depth = depth || 0;
  if (depth > 64) return true;
  if (s === true || s === undefined) return true;
  if (s === false) { errors.push({ path, message: "no value is allowed here" }); return false; }
  const before = errors.length;
  const add = (message) => errors.push({ path, message });
  if (s.$ref) {
    validate(schemas, schemas.resolve(s.$ref), v, path, errors, depth + 1);
  }
  const types = typesOf(s);
  if (types && !types.some((t) => typeMatches(t, v))) {
    add("want " + types.map((t) => typeWords[t] || t).join(" or ") + ", got " + describe(v));
    return false;
  }
  if (s.enum && !s.enum.some((e) => deepEqual(e, v))) {
    add("want one of " + s.enum.map((e) => JSON.stringify(e)).join(", ") + ", got " + JSON.stringify(plain(v)));
  }
  if ("const" in s && !deepEqual(s.const, v)) add("want " + JSON.stringify(s.const));
  if (typeof v === "string") {
    if (s.pattern) {
      let re = null;
      try { re = new RegExp(s.pattern, "u"); } catch (e) { re = null; }
      if (re && !re.test(v)) add(patternMessage(s, v));
    }
    const len = [...v].length;
    if (s.minLength !== undefined && len < s.minLength) add("want at least " + s.minLength + " characters");
    if (s.maxLength !== undefined && len > s.maxLength) add("want at most " + s.maxLength + " characters");
  }
  if (v instanceof Num) {
    const exact = /^-?[0-9]+$/.test(v.raw) ? BigInt(v.raw) : null;
    const below = (b) => { const e = exactBound(b); return exact !== null && e !== null ? exact < e : v.value < b; };
    const above = (b) => { const e = exactBound(b); return exact !== null && e !== null ? exact > e : v.value > b; };
    if (s.minimum !== undefined && below(s.minimum)) add("want at least " + boundText(s.minimum) + ", got " + v.raw);
    if (s.maximum !== undefined && above(s.maximum)) add("want at most " + boundText(s.maximum) + ", got " + v.raw);
    if (s.exclusiveMinimum !== undefined && !above(s.exclusiveMinimum)) add("want more than " + boundText(s.exclusiveMinimum));
    if (s.exclusiveMaximum !== undefined && !below(s.exclusiveMaximum)) add("want less than " + boundText(s.exclusiveMaximum));
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) add("want at least " + s.minItems + " elements");
    if (s.maxItems !== undefined && v.length > s.maxItems) add("want at most " + s.maxItems + " elements");
    if (Array.isArray(s.items)) {
      v.forEach((x, n) => {
        const item = n < s.items.length ? s.items[n] : s.additionalItems;
        validate(schemas, item, x, path + "[" + n + "]", errors, depth + 1);
      });
    } else if (s.items !== undefined) {
      v.forEach((x, n) => validate(schemas, s.items, x, path + "[" + n + "]", errors, depth + 1));
    }
  }
  if (v && typeof v === "object" && !Array.isArray(v) && !(v instanceof Num)) {
    const keys = Object.keys(v);
    const props = s.properties || {};
    for (const r of s.required || []) {
      if (!keys.includes(r)) errors.push({ path: joinPath(path, r), message: "required" });
    }
    for (const k of keys) {
      const p = joinPath(path, k);
      if (Object.prototype.hasOwnProperty.call(props, k)) validate(schemas, props[k], v[k], p, errors, depth + 1);
      else if (s.additionalProperties === false) errors.push({ path: p, message: "unknown field" + suggest(k, Object.keys(props)) });
      else if (s.additionalProperties && typeof s.additionalProperties === "object") validate(schemas, s.additionalProperties, v[k], p, errors, depth + 1);
      if (s.propertyNames) {
        const e = [];
        validate(schemas, s.propertyNames, k, p, e, depth + 1);
        if (e.length) errors.push({ path: p, message: "the key " + JSON.stringify(k) + ": " + e[0].message });
      }
    }
    if (s.minProperties !== undefined && keys.length < s.minProperties) add("want at least " + s.minProperties + " members");
    if (s.maxProperties !== undefined && keys.length > s.maxProperties) add("want at most " + s.maxProperties + " members");
  }
  for (const sub of s.allOf || []) validate(schemas, sub, v, path, errors, depth + 1);
  if (s.anyOf) {
    const tries = s.anyOf.map((alt) => { const e = []; validate(schemas, alt, v, path, e, depth + 1); return e; });
    if (!tries.some((e) => e.length === 0)) {
      // Report the alternative of the value's type, when there is one.
      const typed = s.anyOf.map((alt, n) => [alt, n]).filter(([alt]) => fitsType(schemas, alt, v));
      if (typed.length === 1) errors.push(...tries[typed[0][1]]);
      else add(s.description && depth > 0 ? firstSentence(s.description) : "does not fit any of the allowed forms");
    }
  }
  if (s.oneOf) {
    const ok = s.oneOf.filter((alt) => { const e = []; validate(schemas, alt, v, path, e, depth + 1); return e.length === 0; }).length;
    if (ok !== 1) add(oneOfMessage(s, v) || (ok === 0 ? "does not fit any of the allowed forms" : "fits more than one of the allowed forms"));
  }
  if (s.not) {
    const e = [];
    validate(schemas, s.not, v, path, e, depth + 1);
    if (e.length === 0) add(notMessage(s.not, v));
  }
  return errors.length === before;
}

function fitsType(schemas, alt, v) {
  alt = schemas.deref(alt);
  const types = typesOf(alt);
  if (types) return types.some((t) => typeMatches(t, v));
  if (alt.anyOf) return alt.anyOf.some((a) => fitsType(schemas, a, v));
  if (alt.properties || alt.required) return jsonType(v) === "object";
  if (alt.enum) return alt.enum.some((e) => jsonType(e) === jsonType(v));
  return false;
}

// oneOfMessage names the set members of a protobuf oneof (the schema the
// bridge writes for it) when more than one is set.
function oneOfMessage(s, v) {
  if (!v || typeof v !== "object" || Array.isArray(v)) return "";
  const set = [];
  for (const alt of s.oneOf) {
    for (const a of alt.anyOf || [alt]) {
      const name = (a.required || [])[0];
      if (name !== undefined && name in v && v[name] !== null) set.push(name);
    }
  }
  return set.length > 1 ? "give at most one of " + set.join(", ") + (s.description ? " (" + s.description.replace(/\.$/, "") + ")" : "") : "";
}

// notMessage explains a value that fits a "not": for the bridge's "not
// both the JSON and the proto name of a field" it names them.
function notMessage(not, v) {
  for (const alt of not.anyOf || []) {
    const r = alt.required;
    if (r && r.length > 1 && v && typeof v === "object" && r.every((k) => k in v)) {
      return "give one of " + r.join(" and ") + ", not both";
    }
  }
  return "this value is not allowed here";
}

function patternMessage(s, v) {
  const d = s.description || "";
  if (/^An? u?int64/.test(d) || /^An? u?int64/m.test(d.split("\n\n").pop())) return "want a decimal integer, got " + JSON.stringify(v);
  if (d) return "does not fit: " + firstSentence(d.split("\n\n").pop());
  return "does not match the pattern " + s.pattern;
}

function firstSentence(d) {
  const m = /^[^]*?\.(\s|$)/.exec(d);
  return (m ? m[0] : d).trim();
}

function boundText(b) {
  const e = exactBound(b);
  return e !== null ? e.toString() : String(b);
}

function describe(v) {
  const t = jsonType(v);
  if (t === "number") return (isIntegral(v) ? "an integer " : "the number ") + v.raw;
  if (t === "string") return "the string " + JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  return typeWords[t] || t;
}

function suggest(k, names) {
  const lower = k.toLowerCase().replace(/_/g, "");
  const near = names.find((n) => n.toLowerCase().replace(/_/g, "") === lower);
  return near ? " (did you mean " + near + "?)" : names.length ? " (fields: " + names.slice(0, 12).join(", ") + (names.length > 12 ? ", …" : "") + ")" : "";
}

// ---- Examples ---------------------------------------------------------------

// Examples of the well-known types, by the title of their schema.
const wellKnown = {
  "google.protobuf.Timestamp": "1970-01-01T00:00:00Z",
  "google.protobuf.Duration": "0s",
  "google.protobuf.Any": {},
  "google.protobuf.Struct": {},
  "google.protobuf.Value": null,
  "google.protobuf.ListValue": [],
  "google.protobuf.NullValue": null,
  "google.protobuf.FieldMask": "",
  "google.protobuf.Empty": {},
};

// Strings tried, in order, against a pattern.
const patternCandidates = ["", "0", "0s", "1970-01-01T00:00:00Z", "", "a", "true", "AA=="];

const RECURSION = Symbol("recursion");

// skippedMembers are the properties of an input message schema an
// example leaves out: the proto-name aliases (the second of each "not
// both" pair) and every member of a oneof but the first.
function skippedMembers(s) {
  const skip = new Set();
  for (const sub of s.allOf || []) {
    for (const alt of (sub.not && sub.not.anyOf) || []) {
      if (alt.required && alt.required.length === 2) skip.add(alt.required[1]);
    }
    if (sub.oneOf) {
      let first = true;
      for (const alt of sub.oneOf) {
        const names = (alt.anyOf || [alt]).map((a) => (a.required || [])[0]).filter((n) => n !== undefined);
        if (!names.length) continue;
        if (!first) names.forEach((n) => skip.add(n));
        first = false;
      }
    }
  }
  return skip;
}

// example builds a value of schema s with every field present, each with
// a placeholder of its type: enums as their first name, 64-bit integers
// as strings, well-known types in their JSON form.
function example(schemas, s, stack) {
  stack = stack || [];
  if (!s || s === true) return null;
  if (s.$ref) {
    if (stack.includes(s.$ref) || stack.length > 12) return RECURSION;
    return example(schemas, schemas.resolve(s.$ref), stack.concat([s.$ref]));
  }
  if (s.title && Object.prototype.hasOwnProperty.call(wellKnown, s.title)) return clone(wellKnown[s.title]);
  if (s.enum && s.enum.length) return clone(s.enum[0]);
  if ("const" in s) return clone(s.const);
  for (const key of ["anyOf", "oneOf"]) {
    if (s[key] && !s.properties && !typesOf(s)) {
      const alts = s[key].filter((a) => !(a.type === "null"));
      const v = alts.length ? example(schemas, alts[0], stack) : null;
      return v === RECURSION ? null : v;
    }
  }
  let types = typesOf(s);
  if (!types) {
    if (s.properties) types = ["object"];
    else if (s.items) types = ["array"];
    else if (s.allOf && s.allOf.length === 1) return example(schemas, s.allOf[0], stack);
    else return null;
  }
  const nonNull = types.filter((t) => t !== "null");
  const t = nonNull[0] || "null";
  const desc = s.description || "";
  switch (t) {
    case "object": {
      const o = {};
      if (s.properties) {
        const skip = skippedMembers(s);
        for (const [k, p] of Object.entries(s.properties)) {
          if (skip.has(k) || k === "@type") continue;
          const v = example(schemas, p, stack);
          o[k] = v === RECURSION ? null : v;
        }
      }
      return o;
    }
    case "array": {
      const v = example(schemas, s.items, stack);
      return v === RECURSION ? [] : [v];
    }
    case "string": {
      if (s.pattern) {
        let re = null;
        try { re = new RegExp(s.pattern, "u"); } catch (e) { re = null; }
        const hit = re && patternCandidates.find((c) => re.test(c));
        if (hit !== undefined && hit !== null) return hit;
      }
      return "";
    }
    case "integer":
      return /^An? u?int64/m.test(desc) ? "0" : 0; // int32s take strings too, but are numbers
    case "number":
      return 0;
    case "boolean":
      return false;
    default:
      return null;
  }
}

function clone(v) { return v === null || typeof v !== "object" ? v : JSON.parse(JSON.stringify(v)); }

// ---- Methods ----------------------------------------------------------------

// oneofOf reads "Member of oneof NAME: give at most one of a, b." from a
// param's description.
function oneofOf(p) {
  const m = /Member of oneof ([A-Za-z0-9_]+): give at most one of ([^.]+)\./.exec(p.description || "");
  return m ? { name: m[1], members: m[2].split(/,\s*/) } : null;
}

// protoAliasOf reads "The proto name NAME is accepted too." from a
// param's description.
function protoAliasOf(p) {
  const m = /The proto name ([A-Za-z0-9_]+) is accepted too\./.exec(p.description || "");
  return m ? m[1] : null;
}

function kindOf(m) {
  const x = m["x-grpc-streaming"];
  return x ? x.kind : "unary";
}

function sendsMessages(m) {
  const k = kindOf(m);
  return k === "client-streaming" || k === "bidirectional-streaming";
}

// paramsSchema is the schema of a method's params over POST /: for a
// unary or server-streaming method, the object of its params by name
// (their JSON names and the proto names accepted too, at most one
// member of each oneof, not both names of a field); for the others the
// array of request messages.
function paramsSchema(m) {
  const x = m["x-grpc-streaming"];
  if (x && x.clientStreaming) return x.http.params;
  const props = {}, required = [], notBoth = [], oneofs = new Map();
  for (const p of m.params || []) {
    props[p.name] = p.schema;
    if (p.required) required.push(p.name);
    const alias = protoAliasOf(p);
    if (alias) {
      props[alias] = p.schema;
      notBoth.push({ required: [p.name, alias] });
    }
    const o = oneofOf(p);
    if (o) {
      if (!oneofs.has(o.name)) oneofs.set(o.name, []);
      oneofs.get(o.name).push(alias ? [p.name, alias] : [p.name]);
    }
  }
  const s = { type: "object", properties: props, additionalProperties: false };
  if (required.length) s.required = required;
  const all = [];
  if (notBoth.length) all.push({ not: { anyOf: notBoth } });
  for (const [name, members] of oneofs) {
    const set = members.map((names) => ({ anyOf: names.map((n) => ({ required: [n], properties: { [n]: { not: { type: "null" } } } })) }));
    all.push({ description: "At most one member of oneof " + name + " is set.", oneOf: set.concat([{ not: { anyOf: set } }]) });
  }
  if (all.length) s.allOf = all;
  return s;
}

// exampleParams is the params a method's editor starts with.
function exampleParams(schemas, m) {
  const x = m["x-grpc-streaming"];
  if (x && x.clientStreaming) {
    const v = example(schemas, x.request);
    return [v === RECURSION ? {} : v];
  }
  const o = {}, seen = new Set();
  for (const p of m.params || []) {
    const oo = oneofOf(p);
    if (oo) {
      if (seen.has(oo.name)) continue;
      seen.add(oo.name);
    }
    const v = example(schemas, p.schema);
    o[p.name] = v === RECURSION ? null : v;
  }
  return o;
}

// checkParams parses and validates the params text of method m; it
// returns {value, errors, spans}. For a unary method params by position
// (an array) are checked against the params in order.
function checkParams(schemas, m, text) {
  let parsed;
  try { parsed = parseJSON(text); } catch (e) {
    return { errors: [{ path: "", message: "not JSON: " + e.message, at: e.at }], spans: new Map() };
  }
  const v = parsed.value, errors = [];
  const kind = kindOf(m);
  if (kind === "unary" && Array.isArray(v)) {
    const ps = m.params || [];
    if (v.length > ps.length) errors.push({ path: "", message: "want at most " + ps.length + " params by position, got " + v.length });
    v.forEach((x, n) => { if (n < ps.length) validate(schemas, ps[n].schema, x, "[" + n + "]", errors); });
  } else if (!sendsMessages(m) && (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof Num)) {
    errors.push({ path: "", message: kind === "unary" ? "want an object (params by name) or an array (by position)" : "want an object: the request message, by name" });
  } else {
    validate(schemas, paramsSchema(m), v, "", errors);
  }
  return { value: v, errors: dedupe(errors), spans: parsed.spans };
}

// checkMessages validates the text of messages to send on an open
// stream: an array of request messages or one of them.
function checkMessages(schemas, m, text) {
  let parsed;
  try { parsed = parseJSON(text); } catch (e) {
    return { errors: [{ path: "", message: "not JSON: " + e.message, at: e.at }], spans: new Map() };
  }
  const x = m["x-grpc-streaming"];
  const errors = [];
  const v = parsed.value;
  const list = Array.isArray(v) ? v : [v];
  list.forEach((msg, n) => validate(schemas, x.request, msg, Array.isArray(v) ? "[" + n + "]" : "", errors));
  return { value: v, messages: list, errors: dedupe(errors), spans: parsed.spans };
}

function dedupe(errors) {
  const seen = new Set();
  return errors.filter((e) => { const k = e.path + "\u0000" + e.message; if (seen.has(k)) return false; seen.add(k); return true; });
}

// typeSummary is a short description of a schema's type.
function typeSummary(schemas, s, depth) {
  depth = depth || 0;
  if (!s || depth > 4) return "any";
  if (s.$ref) {
    const name = s.$ref.replace(/^#\/components\/schemas\//, "").replace(/-input$/, "");
    const t = schemas.resolve(s.$ref);
    if (t.title && wellKnown[t.title] !== undefined) return name;
    if (t.enum || (t.anyOf && t.anyOf.some((a) => a.enum))) return "enum " + name;
    return name;
  }
  if (s.anyOf) return s.anyOf.filter((a) => a.type !== "null").map((a) => typeSummary(schemas, a, depth + 1)).join(" | ") || "null";
  const types = (typesOf(s) || []).filter((t) => t !== "null");
  const d = s.description || "";
  const wide = /^(An? u?int64|An? u?int32|A float|A double)/m.exec(d.split("\n\n").pop());
  if (wide) return wide[1].replace(/^An? /, "") + (types.includes("string") && /64/.test(wide[1]) ? " (as a string)" : "");
  if (types.includes("array")) return "array of " + typeSummary(schemas, s.items, depth + 1);
  if (types.includes("object") && s.additionalProperties && typeof s.additionalProperties === "object" && !s.properties) return "map of " + typeSummary(schemas, s.additionalProperties, depth + 1);
  if (s.contentEncoding === "base64") return "bytes (base64)";
  if (types.length) return types.join(" | ");
  return "any";
}

// definitions collects the component schemas s refers to, transitively
// (at most 64), for display beside it.
function definitions(schemas, s) {
  const out = {}, todo = [s];
  while (todo.length && Object.keys(out).length < 64) {
    const v = todo.pop();
    if (!v || typeof v !== "object") continue;
    if (typeof v.$ref === "string" && v.$ref.startsWith("#/components/schemas/")) {
      const name = v.$ref.slice("#/components/schemas/".length);
      if (!(name in out)) { out[name] = schemas.resolve(v.$ref); todo.push(out[name]); }
    }
    for (const k of Object.keys(v)) if (v[k] && typeof v[k] === "object") todo.push(v[k]);
  }
  return out;
}

// ---- Errors -------------------------------------------------------------------

const statusNames = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
  "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
  "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];
const rpcNames = { "-32700": "PARSE_ERROR", "-32600": "INVALID_REQUEST", "-32601": "METHOD_NOT_FOUND", "-32602": "INVALID_PARAMS", "-32603": "INTERNAL_ERROR" };

// statusName is the canonical name of a JSON-RPC error's code: the gRPC
// status of codes 1..16, the JSON-RPC name of the reserved ones.
function statusName(err) {
  if (err && err.data && typeof err.data.status === "string") return err.data.status;
  const c = err && err.code;
  if (Number.isInteger(c) && c >= 0 && c < statusNames.length) return statusNames[c];
  if (rpcNames[String(c)]) return rpcNames[String(c)];
  if (c <= -32000 && c >= -32099) return "SERVER_ERROR";
  return "";
}

// ---- Requests -----------------------------------------------------------------

// grpcTimeout turns "500ms", "5s", "1m", "2h" or a number of seconds into
// a Grpc-Timeout value ("500m", "5S"), or throws.
function grpcTimeout(text) {
  const t = text.trim();
  if (t === "") return "";
  const m = /^([0-9]{1,8})(ns|us|µs|ms|s|m|h)?$/.exec(t);
  if (!m) throw new Error("want a whole number and a unit: 500ms, 5s, 1m, 2h (at most 8 digits)");
  if (Number(m[1]) === 0) throw new Error("want a positive timeout");
  const unit = { ns: "n", us: "u", "µs": "u", ms: "m", s: "S", m: "M", h: "H" }[m[2] || "s"];
  return m[1] + unit;
}

// metadataHeaders turns "key: value" lines into Grpc-Metadata-* headers,
// or throws naming the bad line.
function metadataHeaders(text) {
  const out = [];
  text.split("\n").forEach((line, n) => {
    if (line.trim() === "") return;
    const c = line.indexOf(":");
    const key = c < 0 ? "" : line.slice(0, c).trim().toLowerCase();
    if (!/^[0-9a-z_.-]+$/.test(key)) throw new Error("metadata line " + (n + 1) + ": want key: value, the key of 0-9 a-z - _ .");
    const value = line.slice(c + 1).trim();
    if (!/^[\x20-\x7e]*$/.test(value)) throw new Error("metadata line " + (n + 1) + ": the value must be printable ASCII");
    out.push(["Grpc-Metadata-" + key, value]);
  });
  return out;
}

function envelope(id, method, paramsText) {
  const p = paramsText === null ? "" : ',"params":' + paramsText.trim();
  return '{"jsonrpc":"2.0","id":' + id + ',"method":' + JSON.stringify(method) + p + "}";
}

function shellQuote(s) {
  return "'" + s.replace(/'/g, "'\\''") + "'";
}

// curlCommand is the request as a curl command line.
function curlCommand(url, headers, body) {
  const parts = ["curl -sS -X POST " + shellQuote(url)];
  for (const [k, v] of headers) parts.push("-H " + shellQuote(k + ": " + v));
  parts.push("--data-binary " + shellQuote(body));
  return parts.join(" \\\n  ");
}

if (typeof module !== "undefined") {
  module.exports = { parseJSON, Num, Schemas, validate, example, exampleParams, checkParams, checkMessages, paramsSchema,
    statusName, grpcTimeout, metadataHeaders, envelope, curlCommand, shellQuote, typeSummary, RECURSION };
}

// ---- The page -------------------------------------------------------------------

if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => new Explorer().start());
}

const historyKey = "grpc-jsonrpc-bridge.explorer.history";
const historyMax = 50; // calls kept
const historyParamsMax = 64 << 10; // longer params are not kept
const shownMessagesMax = 500; // a stream's messages shown; older ones are dropped
const earlyMax = 1000; // notifications kept for a stream not watched yet

function role(name, root) { return (root || document).querySelector('[data-role="' + name + '"]'); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// pretty indents a JSON text, its numbers as written (a double would
// round a 64-bit integer); text that is not JSON is returned as it is.
function pretty(text) {
  try { return jsonPretty(parseJSON(text).value, ""); } catch (e) { return text; }
}

function jsonPretty(v, ind) {
  if (v instanceof Num) return v.raw;
  const next = ind + "  ";
  if (Array.isArray(v)) return v.length ? "[\n" + v.map((x) => next + jsonPretty(x, next)).join(",\n") + "\n" + ind + "]" : "[]";
  if (v && typeof v === "object") {
    const keys = Object.keys(v);
    return keys.length ? "{\n" + keys.map((k) => next + JSON.stringify(k) + ": " + jsonPretty(v[k], next)).join(",\n") + "\n" + ind + "}" : "{}";
  }
  return JSON.stringify(v);
}

class Explorer {
  constructor() {
    this.base = location.pathname.replace(/explorer\/?$/, "");
    this.doc = null;
    this.schemas = new Schemas({});
    this.methods = new Map();
    this.current = null;
    this.nextId = 1;
    this.socket = null;
    this.stream = null;
  }

  url(p) { return location.origin + this.base + p; }

  start() {
    role("auth-form").addEventListener("submit", (e) => { e.preventDefault(); this.load(); });
    role("search").addEventListener("input", () => this.filter());
    role("search").addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown" || e.key === "Enter") {
        const first = [...document.querySelectorAll("[data-method]")].find((b) => !b.closest("li").hidden);
        if (first) { e.preventDefault(); e.key === "Enter" ? this.select(first.dataset.method, true) : first.focus(); }
      }
    });
    role("methods").addEventListener("keydown", (e) => this.arrows(e));
    role("call").addEventListener("submit", (e) => { e.preventDefault(); this.send(); });
    role("call").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); this.send(); }
    });
    role("params").addEventListener("input", () => { this.fit(); this.check(false); });
    role("example").addEventListener("click", () => { this.fillExample(); this.check(false); });
    role("copy-curl").addEventListener("click", () => this.copyCurl());
    role("stream-send").addEventListener("click", () => this.streamSend());
    role("stream-close").addEventListener("click", () => this.streamControl("rpc.stream.close"));
    role("stream-cancel").addEventListener("click", () => this.streamControl("rpc.stream.cancel"));
    role("transport").addEventListener("change", () => this.transportHelp());
    for (const r of ["token", "metadata", "timeout"]) role(r).addEventListener("input", () => this.transportHelp());
    role("history-clear").addEventListener("click", () => { localStorage.removeItem(historyKey); this.renderHistory(); });
    window.addEventListener("hashchange", () => this.fromHash());
    this.renderHistory();
    this.load();
  }

  // load fetches the document: GET /openrpc.json without a token,
  // rpc.discover with it (the methods that token may call).
  async load() {
    const status = role("list-status");
    const token = role("token").value.trim();
    status.className = "list-status";
    status.textContent = "Loading…";
    let doc = null;
    try {
      if (token) {
        const r = await fetch(this.url(""), { method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
          body: '{"jsonrpc":"2.0","id":"discover","method":"rpc.discover"}' });
        const text = await r.text();
        let reply = null;
        try { reply = JSON.parse(text); } catch (e) { reply = null; }
        if (!r.ok || !reply || reply.error) throw new Error(listError(r.status, reply && reply.error));
        doc = reply.result;
      } else {
        const r = await fetch(this.url("openrpc.json"));
        const text = await r.text();
        if (r.status === 401) throw new Error("authentication is on: enter a bearer token and load the methods");
        if (!r.ok) throw new Error("HTTP " + r.status + ": " + errorText(text));
        doc = JSON.parse(text);
      }
    } catch (e) {
      status.className = "list-status bad";
      status.textContent = e.message || String(e);
      this.setDocument({ methods: [] });
      return;
    }
    this.setDocument(doc);
    const n = this.methods.size;
    status.textContent = n + (n === 1 ? " method" : " methods") + (token ? " this token may call" : "");
  }

  setDocument(doc) {
    this.doc = doc;
    this.schemas = new Schemas(doc);
    this.methods = new Map((doc.methods || []).map((m) => [m.name, m]));
    role("title").textContent = doc.info ? doc.info.title + " " + doc.info.version : "";
    const box = role("methods");
    box.replaceChildren();
    const services = new Map();
    for (const m of this.methods.values()) {
      const cut = m.name.lastIndexOf(".");
      const svc = m.name.slice(0, cut);
      if (!services.has(svc)) services.set(svc, []);
      services.get(svc).push(m);
    }
    for (const svc of [...services.keys()].sort()) {
      const ul = el("ul");
      for (const m of services.get(svc)) {
        const kind = kindOf(m);
        ul.append(el("li", { "data-search": (m.name + " " + (m.summary || "") + " " + (m.description || "")).toLowerCase() },
          el("button", { type: "button", "data-method": m.name, title: m.summary || m.name, "aria-current": "false" },
            m.name.slice(m.name.lastIndexOf(".") + 1), kind === "unary" ? null : el("span", { class: "kind", text: " · " + kind }),
            m.deprecated ? el("span", { class: "kind", text: " · deprecated" }) : null)));
      }
      box.append(el("section", { "data-service": svc }, el("h3", { text: svc }), ul));
    }
    box.querySelectorAll("[data-method]").forEach((b) => b.addEventListener("click", () => this.select(b.dataset.method, true)));
    this.filter();
    if (this.current && this.methods.has(this.current.name)) this.select(this.current.name, false, true);
    else if (!this.fromHash()) this.clearMethod();
  }

  fromHash() {
    const m = /^#m=(.+)$/.exec(location.hash);
    let name = "";
    try { name = m ? decodeURIComponent(m[1]) : ""; } catch (e) { name = ""; }
    if (name && this.methods.has(name)) { this.select(name, false); return true; }
    return false;
  }

  clearMethod() {
    this.current = null;
    role("method").hidden = true;
    role("call").hidden = true;
    role("response").hidden = true;
  }

  filter() {
    const q = role("search").value.trim().toLowerCase();
    for (const sec of role("methods").querySelectorAll("section")) {
      let any = false;
      for (const li of sec.querySelectorAll("li")) {
        li.hidden = q !== "" && !q.split(/\s+/).every((w) => li.dataset.search.includes(w));
        any = any || !li.hidden;
      }
      sec.hidden = !any;
    }
  }

  arrows(e) {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    const all = [...document.querySelectorAll("[data-method]")].filter((b) => !b.closest("li").hidden);
    const i = all.indexOf(document.activeElement);
    if (i < 0) return;
    e.preventDefault();
    const j = e.key === "ArrowDown" ? Math.min(all.length - 1, i + 1) : i - 1;
    if (j < 0) role("search").focus(); else all[j].focus();
  }

  // select shows method name, with its example params unless keep.
  select(name, focus, keep) {
    const m = this.methods.get(name);
    if (!m) return;
    const changed = !this.current || this.current.name !== name;
    this.current = m;
    for (const b of document.querySelectorAll("[data-method]")) b.setAttribute("aria-current", b.dataset.method === name ? "true" : "false");
    if (location.hash !== "#m=" + encodeURIComponent(name)) history.replaceState(null, "", "#m=" + encodeURIComponent(name));
    const kind = kindOf(m);
    role("method").hidden = false;
    role("call").hidden = false;
    role("method-name").textContent = m.name;
    role("method-kind").textContent = kind === "unary" ? "" : kind + (m.deprecated ? ", deprecated" : "");
    role("method-grpc").textContent = (m["x-grpc-method"] || "") + (m.deprecated ? " (deprecated)" : "");
    role("method-description").textContent = m.description || m.summary || "";
    this.renderParams(m);
    const ps = paramsSchema(m);
    role("params-schema").textContent = JSON.stringify({ schema: ps, definitions: definitions(this.schemas, ps) }, null, 2);
    const rs = m.result ? m.result.schema : {};
    role("result-schema").textContent = JSON.stringify({ schema: rs, definitions: definitions(this.schemas, rs) }, null, 2);
    const errs = role("method-errors");
    errs.replaceChildren();
    for (let e of m.errors || []) {
      const ex = e.$ref ? this.schemas.resolve(e.$ref) : e;
      errs.append(el("li", { text: ex.code + " " + (statusName(ex) || "") + (e.$ref ? "" : ": " + ex.message) }));
    }
    const stream = m["x-grpc-streaming"];
    role("transport-box").hidden = !stream;
    role("params-help").textContent = sendsMessages(m)
      ? "an array of request messages (each sent in order; over WebSocket more can be sent with the stream open)"
      : kind === "unary" ? "an object, by name (or an array, by position)" : "the request message, by name";
    if (changed && !keep) {
      this.fillExample();
      role("response").hidden = true;
      role("curl").hidden = true;
      role("curl-label").hidden = true;
    }
    this.transportHelp();
    this.check(false);
    if (focus) role("params").focus();
  }

  renderParams(m) {
    const body = role("params-table").querySelector("tbody");
    body.replaceChildren();
    let rows = m.params || [];
    if (sendsMessages(m)) {
      const req = this.schemas.deref(m["x-grpc-streaming"].request);
      const skip = skippedMembers(req);
      rows = Object.entries(req.properties || {}).filter(([k]) => !skip.has(k)).map(([name, schema]) => ({ name, schema, description: schema.description }));
      body.append(el("tr", {}, el("td", { colspan: "3", class: "help", text: "Each request message (" + (req.title || "") + ") has:" })));
    }
    for (const p of rows) {
      const desc = [p.description, p.schema && p.schema.description].filter(Boolean).join("\n\n");
      body.append(el("tr", { "data-field": p.name },
        el("td", { class: p.required ? "required" : "", text: p.name }),
        el("td", { text: typeSummary(this.schemas, p.schema) }),
        el("td", { class: "description" }, desc, el("span", { class: "field-error-inline", "data-role": "field-error-inline" }))));
    }
  }

  fillExample() {
    if (!this.current) return;
    role("params").value = JSON.stringify(exampleParams(this.schemas, this.current), null, 2);
    this.fit();
  }

  // fit sizes the params editor to its text, within 3 to 18 lines.
  fit() {
    const ta = role("params");
    ta.rows = Math.max(3, Math.min(18, ta.value.split("\n").length + 1));
  }

  // check validates the params; it shows the errors at their fields and
  // returns the parsed params or null.
  check(focusError) {
    const m = this.current;
    if (!m) return null;
    const text = role("params").value;
    const res = checkParams(this.schemas, m, text);
    this.showFieldErrors(res, focusError);
    return res.errors.length ? null : res;
  }

  showFieldErrors(res, focusError) {
    const list = role("params-errors");
    list.replaceChildren();
    const ta = role("params");
    ta.setAttribute("aria-invalid", res.errors.length ? "true" : "false");
    for (const tr of role("params-table").querySelectorAll("tr[data-field]")) {
      tr.classList.remove("invalid");
      tr.querySelector('[data-role="field-error-inline"]').textContent = "";
    }
    for (const e of res.errors) {
      const field = e.path || "(params)";
      const b = el("button", { type: "button", text: field });
      b.addEventListener("click", () => this.reveal(res, e));
      list.append(el("li", { "data-role": "field-error", "data-field": e.path }, b, ": " + e.message));
      const top = e.path.replace(/^\[[0-9]+\]\.?/, "").split(/[.[]/)[0];
      const tr = top && [...role("params-table").querySelectorAll("tr[data-field]")].find((r) => r.dataset.field === top);
      if (tr) {
        tr.classList.add("invalid");
        const span = tr.querySelector('[data-role="field-error-inline"]');
        span.textContent = (span.textContent ? span.textContent + "; " : "") + e.path + ": " + e.message;
      }
    }
    if (focusError && res.errors.length) this.reveal(res, res.errors[0]);
  }

  // reveal selects the text of the field an error names in the editor.
  reveal(res, e) {
    const ta = role("params");
    ta.focus();
    let span = res.spans.get(e.path);
    if (!span && e.message === "required") span = res.spans.get(e.path.slice(0, Math.max(0, e.path.lastIndexOf("."))));
    if (span) ta.setSelectionRange(span.start, span.end);
    else if (e.at !== undefined) ta.setSelectionRange(e.at, Math.min(ta.value.length, e.at + 1));
  }

  // headers are the request's headers, or throw naming the field that
  // holds a bad value (marked invalid).
  headers() {
    const h = [["Content-Type", "application/json"]];
    const token = role("token").value.trim();
    if (token) h.push(["Authorization", "Bearer " + token]);
    const field = (name, f) => {
      const input = role(name);
      try { const v = f(input.value); input.setAttribute("aria-invalid", "false"); return v; } catch (e) {
        input.setAttribute("aria-invalid", "true");
        throw new Error(name + ": " + e.message);
      }
    };
    for (const kv of field("metadata", metadataHeaders)) h.push(kv);
    const t = field("timeout", grpcTimeout);
    if (t) h.push(["Grpc-Timeout", t]);
    return h;
  }

  // overWS reports whether a streaming call goes over the WebSocket:
  // chosen, and no header the browser cannot send on one.
  overWS() {
    const m = this.current;
    if (!m || !m["x-grpc-streaming"] || role("transport").value !== "ws") return false;
    return !this.needsHeaders();
  }

  // overLive reports whether a streaming call goes over POST / with its
  // messages live (Accept: text/event-stream): the WebSocket chosen, but
  // headers it cannot carry, and a method whose responses stream.
  overLive() {
    const m = this.current;
    const x = m && m["x-grpc-streaming"];
    return !!(x && x.httpLive && role("transport").value === "ws" && this.needsHeaders());
  }

  // needsHeaders reports whether the call carries what a browser cannot
  // send on a WebSocket (the token it can: as a subprotocol).
  needsHeaders() {
    return role("metadata").value.trim() !== "" || role("timeout").value.trim() !== "";
  }

  transportHelp() {
    const m = this.current;
    const help = role("transport-help");
    help.textContent = "";
    if (!m || !m["x-grpc-streaming"]) return;
    const live = this.overLive();
    if (live) {
      help.textContent = "Browsers cannot send headers on a WebSocket: with metadata or a timeout this stream goes over POST /, its messages live (Server-Sent Events), after the params sent at once.";
    } else if (role("transport").value === "ws" && this.needsHeaders()) {
      help.textContent = "Browsers cannot send headers on a WebSocket: with metadata or a timeout this stream goes over POST /, its messages in one reply.";
    }
    role("stream-controls").hidden = !this.overWS() && !live;
    role("stream-send").hidden = !sendsMessages(m) || live;
    role("stream-close").hidden = !sendsMessages(m) || live;
  }

  setStatus(text, cls) {
    const s = role("status");
    s.textContent = text;
    s.className = "status" + (cls ? " " + cls : "");
  }

  showError(err) {
    const box = role("error");
    if (!err) { box.hidden = true; return; }
    box.hidden = false;
    role("error-code").textContent = String(err.code);
    role("error-status").textContent = statusName(err);
    role("error-message").textContent = err.message || "";
    const details = err.data === undefined ? "" : pretty(JSON.stringify(err.data));
    role("error-details").textContent = details;
  }

  resetResponse() {
    role("response").hidden = false;
    this.showError(null);
    role("reply").textContent = "";
    role("stream").hidden = true;
    role("stream-messages").replaceChildren();
    role("stream-messages").removeAttribute("start");
    role("stream-end").hidden = true;
    role("stream-end").textContent = "";
    role("stream-state").textContent = "";
  }

  async send() {
    const m = this.current;
    if (!m) return;
    const res = this.check(true);
    if (!res) { this.setStatus("Not sent: fix the params first.", "bad"); role("response").hidden = false; return; }
    let headers;
    try { headers = this.headers(); } catch (e) { this.resetResponse(); this.setStatus("Not sent: " + e.message, "bad"); return; }
    const text = role("params").value;
    const entry = { method: m.name, params: text, metadata: role("metadata").value, timeout: role("timeout").value,
      transport: role("transport").value, at: new Date().toISOString() };
    this.endStream();
    this.resetResponse();
    if (this.overWS()) return this.sendWS(m, res, entry);
    if (this.overLive()) return this.sendLive(m, headers, entry);
    const id = this.nextId++;
    const body = envelope(id, m.name, text);
    this.setStatus("Sending…");
    const t0 = performance.now();
    let r, replyText;
    try {
      r = await fetch(this.url(""), { method: "POST", headers: Object.fromEntries(headers), body });
      replyText = await r.text();
    } catch (e) {
      this.setStatus("The request failed: " + (e.message || e), "bad");
      this.remember(entry, "failed");
      return;
    }
    const ms = Math.round(performance.now() - t0);
    role("reply").textContent = pretty(replyText);
    let reply = null;
    try { reply = JSON.parse(replyText); } catch (e) { reply = null; }
    const err = reply && !Array.isArray(reply) ? reply.error : null;
    this.showError(err);
    const rid = r.headers.get("X-Request-Id");
    this.setStatus("HTTP " + r.status + (r.statusText ? " " + r.statusText : "") + " · " + ms + " ms" + (rid ? " · X-Request-Id " + rid : ""), err || !r.ok ? "bad" : "ok");
    if (reply && !err && m["x-grpc-streaming"] && Array.isArray(reply.result) && m["x-grpc-streaming"].serverStreaming) {
      role("stream").hidden = false;
      role("stream-state").textContent = "(" + reply.result.length + ", over HTTP: after the stream ended)";
      for (const msg of reply.result) this.addMessage(msg);
    }
    this.remember(entry, err ? "error " + err.code + " " + statusName(err) : r.ok ? "HTTP " + r.status : "HTTP " + r.status, ms);
  }

  // ---- streams over POST /, live ----

  // sendLive calls m over POST / asking for its messages as they come
  // (Accept: text/event-stream): each is shown as it arrives, and the
  // reply, last, ends the stream. A call answered before its stream
  // opened (a refusal, bad params) gets one JSON reply, shown as any.
  async sendLive(m, headers, entry) {
    const id = this.nextId++;
    const body = envelope(id, m.name, role("params").value);
    const t0 = performance.now();
    const st = { live: true, abort: new AbortController(), id: null, method: m, t0, count: 0, ended: false, entry };
    this.stream = st;
    role("stream").hidden = false;
    role("stream-state").textContent = "(opening, over POST /)";
    this.setStatus("Sending…");
    let r;
    try {
      r = await fetch(this.url(""), { method: "POST", headers: Object.fromEntries([...headers, ["Accept", "text/event-stream"]]),
        body, signal: st.abort.signal });
    } catch (e) {
      if (this.stream === st) {
        st.ended = true;
        this.setStatus("The request failed: " + (e.message || e), "bad");
        this.remember(entry, "failed");
      }
      return;
    }
    const rid = r.headers.get("X-Request-Id");
    const about = "HTTP " + r.status + (rid ? " · X-Request-Id " + rid : "");
    if (!(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      const replyText = await r.text();
      if (this.stream !== st) return;
      st.ended = true;
      const ms = Math.round(performance.now() - t0);
      role("reply").textContent = pretty(replyText);
      let reply = null;
      try { reply = JSON.parse(replyText); } catch (e) { reply = null; }
      const err = reply ? reply.error : null;
      this.showError(err);
      role("stream-state").textContent = "(not opened)";
      this.setStatus(about + " · " + ms + " ms", err || !r.ok ? "bad" : "ok");
      this.remember(entry, err ? "error " + err.code + " " + statusName(err) : "HTTP " + r.status, ms);
      return;
    }
    role("stream-state").textContent = "(open over POST /: messages as they arrive)";
    this.setStatus(about + " · stream open, live · " + Math.round(performance.now() - t0) + " ms", "ok");
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
          if (data && this.stream === st) this.onLive(st, JSON.parse(data));
        }
      }
    } catch (e) {
      // cancelled, or the connection closed: below
    }
    if (this.stream === st && !st.ended) {
      st.ended = true;
      role("stream-state").textContent = "(" + (st.abort.signal.aborted ? "cancelled" : "the connection closed") + " after " +
        st.count + (st.count === 1 ? " message)" : " messages)");
    }
  }

  // onLive shows msg, a message of the live stream st: a notification,
  // or the reply that ends it.
  onLive(st, msg) {
    if (msg.method === "rpc.stream.message") {
      st.count++;
      this.addMessage(msg.params.message);
      return;
    }
    st.ended = true;
    const ms = Math.round(performance.now() - st.t0);
    role("reply").textContent = JSON.stringify(msg, null, 2);
    const end = role("stream-end");
    end.hidden = false;
    end.textContent = JSON.stringify(msg.error ? { error: msg.error } : msg.result, null, 2);
    role("stream-state").textContent = "(ended over POST /: " + st.count + (st.count === 1 ? " message)" : " messages)");
    if (msg.error) this.showError(msg.error);
    this.setStatus("POST / · stream ended" + (msg.error ? " with code " + msg.error.code + " " + statusName(msg.error) : "") + " · " + ms + " ms", msg.error ? "bad" : "ok");
    this.remember(st.entry, msg.error ? "error " + msg.error.code + " " + statusName(msg.error) : st.count + " messages", ms);
  }

  // ---- WebSocket streams ----

  // ws is the page's WebSocket, opened on first use (or again after it
  // closed), shared by its streams.
  async ws() {
    const token = role("token").value.trim();
    if (this.socket && !this.socket.closed && this.socket.token !== token) {
      this.socket.ws.close(1000, "the token changed");
      this.socket = null;
    }
    if (!this.socket || this.socket.closed) this.socket = new Socket(location.origin.replace(/^http/, "ws") + this.base + "ws", this, token);
    const sock = this.socket;
    await sock.opened;
    return sock;
  }

  async sendWS(m, res, entry) {
    const x = m["x-grpc-streaming"];
    this.setStatus("Opening the WebSocket…");
    const t0 = performance.now();
    let sock;
    try { sock = await this.ws(); } catch (e) {
      this.setStatus("The WebSocket could not be opened (" + e.message + ")", "bad");
      this.remember(entry, "failed");
      return;
    }
    const st = { id: null, method: m, t0, count: 0, ended: false, sock, entry };
    this.stream = st;
    role("stream").hidden = false;
    role("stream-state").textContent = "(opening)";
    const reply = await sock.call(m.name, x.clientStreaming ? null : role("params").value);
    if (this.stream !== st) { // another call started meanwhile
      if (reply.result && reply.result.stream) {
        sock.watch(reply.result.stream, () => {});
        sock.call("rpc.stream.cancel", JSON.stringify({ stream: reply.result.stream }));
      }
      return;
    }
    role("reply").textContent = JSON.stringify(reply, null, 2);
    if (reply.error) {
      this.showError(reply.error);
      st.ended = true;
      role("stream-state").textContent = "(not opened)";
      this.setStatus("WebSocket · " + Math.round(performance.now() - t0) + " ms", "bad");
      this.remember(entry, "error " + reply.error.code + " " + statusName(reply.error), Math.round(performance.now() - t0));
      return;
    }
    st.id = reply.result.stream;
    role("stream-state").textContent = "(stream " + st.id + " open)";
    this.setStatus("WebSocket · stream " + st.id + " open · " + Math.round(performance.now() - t0) + " ms", "ok");
    sock.watch(st.id, (method, params) => this.onStream(st, method, params));
    if (x.clientStreaming) {
      const msgs = checkMessages(this.schemas, m, role("params").value).messages || [];
      await this.sendMessages(st, msgs);
    }
  }

  async sendMessages(st, msgs) {
    for (const msg of msgs) {
      if (st.ended) return;
      const r = await st.sock.call("rpc.stream.send", sendParams(st.id, msg));
      if (r.error) { this.showError(r.error); return; }
    }
    if (!st.ended) role("stream-state").textContent = "(stream " + st.id + " open: " + msgs.length + " sent)";
  }

  async streamSend() {
    const st = this.stream;
    if (!st || st.ended || st.id === null) { this.setStatus("No open stream: send to open one.", "bad"); return; }
    const res = checkMessages(this.schemas, st.method, role("params").value);
    this.showFieldErrors(res, true);
    if (res.errors.length) return;
    await this.sendMessages(st, res.messages);
  }

  async streamControl(method) {
    const st = this.stream;
    if (st && st.live) { // over POST /: cancelling is leaving
      if (!st.ended && method === "rpc.stream.cancel") st.abort.abort();
      return;
    }
    if (!st || st.ended || st.id === null) { this.setStatus("No open stream.", "bad"); return; }
    const r = await st.sock.call(method, JSON.stringify({ stream: st.id }));
    if (r.error) this.showError(r.error);
    else if (method === "rpc.stream.close" && !st.ended) role("stream-state").textContent = "(stream " + st.id + " half-closed)";
  }

  onStream(st, method, params) {
    if (this.stream !== st) return;
    if (method === "rpc.stream.message") {
      st.count++;
      this.addMessage(params.message);
      return;
    }
    if (method === "rpc.stream.end") {
      st.ended = true;
      const ms = Math.round(performance.now() - st.t0);
      const end = role("stream-end");
      end.hidden = false;
      end.textContent = JSON.stringify(params, null, 2);
      role("stream-state").textContent = "(stream " + st.id + " ended: " + st.count + (st.count === 1 ? " message)" : " messages)");
      if (params.error) this.showError(params.error);
      this.setStatus("WebSocket · stream " + st.id + " ended" + (params.error ? " with code " + params.error.code + " " + statusName(params.error) : "") + " · " + ms + " ms", params.error ? "bad" : "ok");
      this.remember(st.entry, params.error ? "error " + params.error.code + " " + statusName(params.error) : st.count + " messages", ms);
    }
  }

  // addMessage shows a stream's message; past shownMessagesMax the
  // oldest is dropped, so a long stream does not fill the page's memory.
  addMessage(msg) {
    const list = role("stream-messages");
    list.append(el("li", { "data-role": "stream-message" }, el("pre", { text: JSON.stringify(msg) })));
    if (list.children.length > shownMessagesMax) {
      list.firstElementChild.remove();
      list.start = Number(list.start || 1) + 1; // numbered as received
    }
  }

  endStream() {
    const st = this.stream;
    this.stream = null;
    if (st && st.live) {
      if (!st.ended) st.abort.abort();
      return;
    }
    if (st && !st.ended && st.id !== null) st.sock.call("rpc.stream.cancel", JSON.stringify({ stream: st.id })).catch(() => {});
  }

  onSocketClosed(why) {
    const st = this.stream;
    if (st && !st.ended && !st.live) {
      st.ended = true;
      role("stream-state").textContent = "(connection closed)";
      this.setStatus("The WebSocket closed: " + why, "bad");
    }
  }

  // ---- curl, history ----

  copyCurl() {
    const m = this.current;
    if (!m) return;
    let headers;
    try { headers = this.headers(); } catch (e) { this.setStatus(e.message, "bad"); role("response").hidden = false; return; }
    const cmd = curlCommand(this.url(""), headers, envelope(this.nextId, m.name, role("params").value));
    const out = role("curl");
    out.hidden = false;
    role("curl-label").hidden = false;
    out.value = cmd;
    role("curl-label").textContent = m["x-grpc-streaming"] ? "curl command (the call over POST /: a stream's messages in one reply)" : "curl command";
    out.select();
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(cmd).catch(() => {});
  }

  history() {
    try {
      const h = JSON.parse(localStorage.getItem(historyKey) || "[]");
      return Array.isArray(h) ? h : [];
    } catch (e) { return []; }
  }

  remember(entry, outcome, ms) {
    const h = this.history();
    const e = Object.assign({}, entry, { outcome, ms });
    if (e.params.length > historyParamsMax) e.params = null; // listed, not replayable
    h.unshift(e);
    try { localStorage.setItem(historyKey, JSON.stringify(h.slice(0, historyMax))); } catch (e) { /* full or off */ }
    this.renderHistory();
  }

  renderHistory() {
    const list = role("history");
    list.replaceChildren();
    this.history().forEach((e, n) => {
      const replay = el("button", { type: "button", "data-role": "replay", "aria-label": "Replay " + e.method + " from " + e.at, text: "Replay" });
      replay.addEventListener("click", () => this.replay(e));
      const load = el("button", { type: "button", "data-role": "history-load", "aria-label": "Load " + e.method + " into the editor", text: "Load" });
      load.addEventListener("click", () => this.restore(e));
      const bad = /^(error|failed|HTTP [45])/.test(e.outcome || "");
      list.append(el("li", { "data-role": "history-entry", "data-history-method": e.method, "data-index": String(n) },
        el("code", { text: e.method }), " ", el("span", { class: "outcome " + (bad ? "bad" : "ok"), text: e.outcome || "" }),
        e.ms !== undefined ? " · " + e.ms + " ms " : " ", el("span", { class: "when", text: e.at }), " ", load, " ", replay));
    });
  }

  restore(e) {
    if (e.params === null) { this.setStatus("The params of that call were too long to keep.", "bad"); role("response").hidden = false; return false; }
    if (!this.methods.has(e.method)) { this.setStatus(e.method + " is not in the method list (another token?)", "bad"); role("response").hidden = false; return false; }
    this.select(e.method, false, true);
    role("params").value = e.params;
    this.fit();
    role("metadata").value = e.metadata || "";
    role("timeout").value = e.timeout || "";
    role("transport").value = e.transport === "http" ? "http" : "ws";
    this.transportHelp();
    this.check(false);
    return true;
  }

  replay(e) {
    if (this.restore(e)) this.send();
  }
}

function sendParams(id, msg) {
  return '{"stream":' + JSON.stringify(id) + ',"message":' + jsonText(msg) + "}";
}

// jsonText writes a parsed value back as JSON, numbers as they were
// written.
function jsonText(v) {
  if (v instanceof Num) return v.raw;
  if (Array.isArray(v)) return "[" + v.map(jsonText).join(",") + "]";
  if (v && typeof v === "object") return "{" + Object.keys(v).map((k) => JSON.stringify(k) + ":" + jsonText(v[k])).join(",") + "}";
  return JSON.stringify(v);
}

const wsTokenProtocol = "base64url.bearer.grpc-jsonrpc-bridge.";

function base64url(s) {
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function listError(code, err) {
  if (err) return (code === 401 ? "the token was refused: " : "rpc.discover failed: ") + err.message;
  return "rpc.discover failed: HTTP " + code;
}

function errorText(text) {
  try { const v = JSON.parse(text); return v.error && (v.error.message || v.error) || text; } catch (e) { return text; }
}

// Socket is the page's WebSocket to the bridge: calls by id, and the
// notifications of its streams by stream id.
// A token travels as a subprotocol, base64url-encoded, beside "jsonrpc",
// which the bridge selects (see docs/explorer.md).
class Socket {
  constructor(url, owner, token) {
    this.token = token || "";
    this.ws = this.token ? new WebSocket(url, ["jsonrpc", wsTokenProtocol + base64url(this.token)]) : new WebSocket(url);
    this.ready = false;
    this.closed = false;
    this.pending = new Map();
    this.streams = new Map();
    this.early = new Map(); // notifications of streams not yet watched
    this.nextId = 1;
    this.opened = new Promise((ok, fail) => {
      this.ws.onopen = () => { this.ready = true; ok(); };
      this.ws.onerror = () => fail(new Error("refused or unreachable"));
    });
    this.ws.onclose = (e) => {
      this.ready = false;
      this.closed = true;
      const why = "code " + e.code + (e.reason ? " " + e.reason : "");
      for (const done of this.pending.values()) done({ error: { code: -32603, message: "the WebSocket closed: " + why } });
      this.pending.clear();
      owner.onSocketClosed(why);
      if (owner.socket === this) owner.socket = null;
    };
    this.ws.onmessage = (e) => this.receive(e.data);
  }

  call(method, paramsText) {
    const id = this.nextId++;
    const frame = '{"jsonrpc":"2.0","id":' + id + ',"method":' + JSON.stringify(method) + (paramsText === null || paramsText === undefined ? "" : ',"params":' + paramsText.trim()) + "}";
    return new Promise((done) => {
      if (!this.ready) { done({ error: { code: -32603, message: "the WebSocket is closed" } }); return; }
      this.pending.set(id, done);
      this.ws.send(frame);
    });
  }

  watch(stream, fn) {
    this.streams.set(stream, fn);
    for (const [method, params] of this.early.get(stream) || []) fn(method, params);
    this.early.delete(stream);
  }

  receive(data) {
    let v;
    try { v = JSON.parse(data); } catch (e) { return; }
    for (const msg of Array.isArray(v) ? v : [v]) {
      if (msg.method && msg.params && typeof msg.params.stream === "string") {
        const fn = this.streams.get(msg.params.stream);
        if (fn) fn(msg.method, msg.params);
        else {
          if (!this.early.has(msg.params.stream)) this.early.set(msg.params.stream, []);
          const q = this.early.get(msg.params.stream);
          if (q.length < earlyMax || msg.method === "rpc.stream.end") q.push([msg.method, msg.params]);
        }
        if (msg.method === "rpc.stream.end") this.streams.delete(msg.params.stream);
      } else if ("id" in msg && this.pending.has(msg.id)) {
        this.pending.get(msg.id)(msg);
        this.pending.delete(msg.id);
      }
    }
  }
}
