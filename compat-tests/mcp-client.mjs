// The official TypeScript MCP client (@modelcontextprotocol/client 2.x) against a Kestrel MCP
// server: `node mcp-client.mjs <url> <mode>` with mode `legacy`, `auto` or a version to pin.
// Prints one JSON line: the negotiated version, the server's name, the tools, and the answers
// of `add`, an input the schema refuses, and a tool that needs approval; then, from a client
// that declares elicitation and answers every question (approving, and 2 nights), the answers
// of `delete` (approval), `book` (a suspended tool) and `ask_clerk` (an agent's approval), with
// the questions it was asked.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, mode] = process.argv.slice(2);
const versionNegotiation = {
  mode: mode === "legacy" || mode === "auto" ? mode : { pin: mode },
};
const client = new Client({ name: "kestrel-compat", version: "1.0.0" }, { versionNegotiation });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
const add = await client.callTool({ name: "add", arguments: { a: 2, b: 40 } });
const refused = await client.callTool({ name: "add", arguments: { a: "two" } }).catch((e) => ({ thrown: String(e) }));
const approval = await client.callTool({ name: "delete", arguments: { a: 1, b: 1 } });
console.log(
  JSON.stringify({
    version: client.getNegotiatedProtocolVersion(),
    server: client.getServerVersion()?.name,
    tools: tools.map((t) => t.name),
    add,
    refused,
    approval,
  }),
);
await client.close();

// A client the server can ask: each question is answered, in either era (an
// `elicitation/create` request, or an `input_required` round).
const asked = [];
const asking = new Client(
  { name: "kestrel-compat-asking", version: "1.0.0" },
  { versionNegotiation, capabilities: { elicitation: { form: {} } } },
);
asking.setRequestHandler("elicitation/create", async (request) => {
  const { message, requestedSchema } = request.params;
  asked.push(message);
  const content = "approve" in (requestedSchema.properties ?? {}) ? { approve: true } : { nights: 2 };
  return { action: "accept", content };
});
await asking.connect(new StreamableHTTPClientTransport(new URL(url)));
const approved = await asking.callTool({ name: "delete", arguments: { a: 1, b: 1 } });
const booked = await asking.callTool({ name: "book", arguments: { hotel: "Tivoli" } });
const clerk = await asking.callTool({ name: "ask_clerk", arguments: { message: "clean up" } });
console.log(JSON.stringify({ version: asking.getNegotiatedProtocolVersion(), asked, approved, booked, clerk }));
await asking.close();
