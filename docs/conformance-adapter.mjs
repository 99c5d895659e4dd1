// A tool-call assembler for OpenAI Chat Completions streams, scored through the
// `toollatch conformance --command` protocol (docs/conformance.md):
//   toollatch conformance --command "node docs/conformance-adapter.mjs"
// stdin: {"case", "dialect", "cancelled", "tools", "events": [{"event", "data", "text"}]}
// stdout: {"calls": [{"name", "id", "arguments", "verdict": "execute" | "reject" | "server"}]}
//         or {"unsupported": "why"} for a dialect it does not read.
let input = "";
for await (const piece of process.stdin) input += piece;
const c = JSON.parse(input);
if (c.dialect !== "openai-chat") {
  console.log(JSON.stringify({ unsupported: "reads openai-chat only" }));
  process.exit(0);
}
const calls = new Map(); // key: choice index / tool_calls[].index
let finished = false;
for (const { data } of c.events) {
  for (const choice of data?.choices ?? []) {
    for (const tc of choice.delta?.tool_calls ?? []) {
      const key = `${choice.index}/${tc.index}`;
      const call = calls.get(key) ?? { id: null, name: null, parts: [] };
      call.id ??= tc.id || null; // set when seen, never appended
      call.name ??= tc.function?.name || null;
      if (typeof tc.function?.arguments === "string") call.parts.push(tc.function.arguments);
      calls.set(key, call);
    }
    if (["tool_calls", "stop"].includes(choice.finish_reason)) finished = true;
  }
}
const out = [...calls.values()].map(({ id, name, parts }) => {
  const text = parts.join("") || "{}";
  let ok = finished && !c.cancelled;
  try { const v = JSON.parse(text); ok &&= v !== null && typeof v === "object" && !Array.isArray(v); } catch { ok = false; }
  return { name, id, arguments: text, verdict: ok ? "execute" : "reject" };
});
console.log(JSON.stringify({ calls: out }));
