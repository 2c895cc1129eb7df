// The official TypeScript SDK (@anthropic-ai/sdk) against the gateway, one scenario per run.
//
//     node typescript_sdk_calls.js system|stream
//
// Env: GATEWAY_URL, GATEWAY_KEY, MODEL; NODE_PATH finds the installed SDK. Prints one JSON
// line: {"value": ...} or {"error": {"status": ..., "message": ...}}.
const Anthropic = require("@anthropic-ai/sdk");

const client = new Anthropic({
  baseURL: process.env.GATEWAY_URL, apiKey: process.env.GATEWAY_KEY, maxRetries: 0,
});
const model = process.env.MODEL;
const question = [{ role: "user", content: "Hello" }];

async function run(scenario) {
  if (scenario === "system") {
    const message = await client.messages.create({
      model, max_tokens: 1024, system: "You are a helpful assistant. Be brief.",
      messages: question,
    });
    return { text: message.content[0].text, model: message.model };
  }
  if (scenario === "stream") {
    const stream = client.messages.stream({ model, max_tokens: 1024, messages: question });
    return { text: await stream.finalText() };
  }
  throw new Error(`unknown scenario ${scenario}`);
}

run(process.argv[2]).then(
  (value) => console.log(JSON.stringify({ value })),
  (err) => {
    if (err instanceof Anthropic.APIError && err.status) {
      const message = err.error?.error?.message ?? err.message;
      console.log(JSON.stringify({ error: { status: err.status, message } }));
    } else {
      console.error(err);
      process.exit(1);
    }
  },
);
