"""Python JSON-RPC clients against a running bridge (BRIDGE_URL, the URL of
POST /) in front of the demo services, as their users call them:
jsonrpclib-pelix's ServerProxy (params by position, dotted method names)
and requests with a hand-written call. Exits non-zero on the first
failure; run by TestPythonClients in ../../clients_python_test.go."""

import json
import os
import sys

import jsonrpclib
import requests

url = os.environ["BRIDGE_URL"]


def check(what, got, want):
    if got != want:
        sys.exit("%s: got %r, want %r" % (what, got, want))
    print("ok:", what)


# jsonrpclib-pelix: proxy.helloworld.Greeter.SayHello("Ada") sends
# {"method":"helloworld.Greeter.SayHello","params":["Ada"]}.
proxy = jsonrpclib.ServerProxy(url)
check("jsonrpclib: by position", proxy.helloworld.Greeter.SayHello("Ada"), {"message": "Hello, Ada!"})
check("jsonrpclib: no params", proxy.helloworld.Greeter.SayHello(), {"message": "Hello, world!"})
check("jsonrpclib: by name", proxy.helloworld.Greeter.SayHello(name="Grace"), {"message": "Hello, Grace!"})
note = proxy.demo.v1.Notes.CreateNote({"title": "from python", "tags": ["py"]})
check("jsonrpclib: a message param", note["title"], "from python")
try:
    proxy.demo.v1.Notes.GetNote("nope")
    sys.exit("jsonrpclib: GetNote of a missing note succeeded")
except jsonrpclib.ProtocolError as e:
    code, message = e.args[0][0], e.args[0][1]
    check("jsonrpclib: a gRPC status as an error", (code, message), (5, 'note "nope" not found'))

try:
    proxy.helloworld.Greeter.SayHello(42)
    sys.exit("jsonrpclib: SayHello(42) succeeded")
except jsonrpclib.ProtocolError as e:
    code, message = e.args[0][0], e.args[0][1]
    check("jsonrpclib: a misfit by position", (code, message), (-32602, "Invalid params: position 0 (name): want a string, got number"))
# a server stream takes its one request by position too; its result is
# the array of its messages
watched = proxy.demo.v1.Notes.WatchNotes(["intro"])
check("jsonrpclib: a server stream by position", [n["id"] for n in watched], ["n1"])
# a batch: jsonrpclib's MultiCall
multi = jsonrpclib.MultiCall(proxy)
multi.helloworld.Greeter.SayHello("Ada")
multi.demo.v1.Notes.GetNote("n1")
hello, welcome = multi()
check("jsonrpclib: MultiCall", (hello, welcome["id"]), ({"message": "Hello, Ada!"}, "n1"))

# requests: a call and a batch, by name.
r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "helloworld.Greeter.SayHello", "params": {"name": "Ada"}})
check("requests: HTTP status", r.status_code, 200)
check("requests: result", r.json(), {"jsonrpc": "2.0", "id": 1, "result": {"message": "Hello, Ada!"}})
batch = [
    {"jsonrpc": "2.0", "id": 1, "method": "helloworld.Greeter.SayHello", "params": ["Ada"]},
    {"jsonrpc": "2.0", "id": 2, "method": "no.Such.Method"},
]
got = sorted(requests.post(url, data=json.dumps(batch)).json(), key=lambda x: x["id"])
check("requests: batch result", got[0]["result"], {"message": "Hello, Ada!"})
check("requests: batch error", got[1]["error"]["code"], -32601)
