// Parse Mermaid blocks with the real Mermaid parser: reads a JSON list of block bodies on stdin and prints,
// for each, its diagram type or the parser's error message (a JSON list on the last line of stdout).
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><body></body>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const mermaid = (await import("mermaid")).default;
mermaid.initialize({ startOnLoad: false });

let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const text of JSON.parse(input)) {
  try {
    out.push((await mermaid.parse(text)).diagramType);
  } catch (error) {
    out.push(`error: ${String(error.message ?? error)}`);
  }
}
console.log(JSON.stringify(out));
