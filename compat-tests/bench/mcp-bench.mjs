// W13's TypeScript pair (BENCHMARKS.md): the official client (@modelcontextprotocol/client 2.x)
// and @modelcontextprotocol/server-everything, `tools/call` of `echo`, the same calls
// kestrel-bench w13 makes. `node bench/mcp-bench.mjs [CALLS] [CONCURRENT]` from compat-tests:
// stdio (the server a child process), then Streamable HTTP (the server on a free port), each
// CALLS sequential calls (p50, p99, calls/s) then CALLS calls from CONCURRENT tasks at once,
// and the server process's peak RSS.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const calls = Number(process.argv[2] ?? 2000);
const concurrent = Number(process.argv[3] ?? 50);
const everything = new URL("../node_modules/.bin/mcp-server-everything", import.meta.url).pathname;

const peakRssMb = (pid) => {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
    return Number(line.split(/\s+/)[1]) / 1024;
  } catch {
    return NaN;
  }
};
const percentile = (sorted, p) => sorted[Math.round((sorted.length - 1) * p)];
const oneCall = async (client) => {
  const started = performance.now();
  const result = await client.callTool({ name: "echo", arguments: { message: "hi" } });
  if (result.content[0].text !== "Echo: hi") throw new Error(JSON.stringify(result));
  return performance.now() - started;
};

async function measure(label, client, pid) {
  for (let i = 0; i < 200; i++) await oneCall(client);
  let times = [];
  let started = performance.now();
  for (let i = 0; i < calls; i++) times.push(await oneCall(client));
  let took = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  console.log(
    `ts ${label} sequential: p50 ${percentile(times, 0.5).toFixed(3)} ms, p99 ${percentile(times, 0.99).toFixed(3)} ms, ${(calls / took).toFixed(0)} calls/s over ${calls} calls`,
  );
  const perTask = Math.floor(calls / concurrent);
  started = performance.now();
  const all = await Promise.all(
    Array.from({ length: concurrent }, async () => {
      const mine = [];
      for (let i = 0; i < perTask; i++) mine.push(await oneCall(client));
      return mine;
    }),
  );
  took = (performance.now() - started) / 1000;
  times = all.flat().sort((a, b) => a - b);
  console.log(
    `ts ${label} ${concurrent} concurrent: p50 ${percentile(times, 0.5).toFixed(3)} ms, p99 ${percentile(times, 0.99).toFixed(3)} ms, ${(times.length / took).toFixed(0)} calls/s over ${times.length} calls, server peak RSS ${peakRssMb(pid).toFixed(1)} MB`,
  );
}

// stdio
{
  const transport = new StdioClientTransport({ command: everything, args: ["stdio"], stderr: "ignore" });
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(transport);
  await measure("stdio", client, transport.pid);
  await client.close();
}

// Streamable HTTP
{
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
  const child = spawn(everything, ["streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: "ignore" });
  const client = new Client({ name: "bench", version: "1" });
  for (let attempt = 0; ; attempt++) {
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
      break;
    } catch (error) {
      if (attempt > 100) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await measure("http", client, child.pid);
  await client.close();
  child.kill();
}
