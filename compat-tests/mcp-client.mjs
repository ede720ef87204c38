// The official TypeScript MCP client (@modelcontextprotocol/client 2.x) against a Kestrel MCP
// server: `node mcp-client.mjs <url> <mode>` with mode `legacy`, `auto` or a version to pin.
// Prints one JSON line: the negotiated version, the server's name, the tools, and the answers
// of `add`, an input the schema refuses, and a tool that needs approval.
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
