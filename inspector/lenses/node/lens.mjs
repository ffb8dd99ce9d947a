// The Vercel AI SDK run on one stored stream, for inspector/lenses/vercel.py.
//
//   echo '{"dialect": "chat", "body": "data: {...}\n\n"}' | node lens.mjs
//
// The job on stdin names the dialect and carries the stream's SSE text.  The
// dialect's provider is created the way its users create it, with a `fetch`
// that answers every request with that text as a 200 event stream, and
// `streamText` runs on it as an agent's step does.  The answer on stdout is
// one JSON object: the tool calls the agent's `fullStream` gave (each with the
// provider's input text, and whether the SDK marked it invalid), the stream's
// error parts, the error its iteration threw (if any), and its finish reason.
//
// Tools: an agent offers the tools it runs, so a call to a name it never
// offered is invalid (NoSuchToolError).  The lens cannot know the agent's
// tools, so it first runs the stream with none to learn the names called,
// then runs it again offering each of them with a schema that takes any JSON
// object (zod's `z.looseObject({})`, as a tool's `z.object` would be): a call
// is then invalid only when its input is not a JSON object.

import { streamText, tool, wrapLanguageModel } from 'ai';
import { z } from 'zod';

const BASE_URL = 'http://lens.invalid';
const KEY = 'lens';

// Each dialect's model, made as its users make it; only that provider is
// imported (importing all four costs a busy machine a few hundred ms).
const MODELS = {
  async chat(fetch) {
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
    return createOpenAICompatible({ name: 'lens', baseURL: BASE_URL, fetch }).chatModel('lens');
  },
  async responses(fetch) {
    const { createOpenAI } = await import('@ai-sdk/openai');
    return createOpenAI({ apiKey: KEY, baseURL: BASE_URL, fetch }).responses('lens');
  },
  async messages(fetch) {
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    return createAnthropic({ apiKey: KEY, baseURL: BASE_URL, fetch }).messages('lens');
  },
  async gemini(fetch) {
    const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
    return createGoogleGenerativeAI({ apiKey: KEY, baseURL: BASE_URL, fetch })('lens');
  },
};

function serving(body) {
  return async () =>
    new Response(body, {
      status: 200,
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    });
}

// The provider's own tool-call parts, in order: their `input` is the text the
// provider assembled, before streamText parses it.
function tapping(model, providerCalls) {
  const tap = new TransformStream({
    transform(part, controller) {
      if (part.type === 'tool-call') providerCalls.push(part);
      controller.enqueue(part);
    },
  });
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v4',
      wrapStream: async ({ doStream }) => {
        const answer = await doStream();
        return { ...answer, stream: answer.stream.pipeThrough(tap) };
      },
    },
  });
}

// "Name: message"; an error the provider itself reported mid-stream (an error
// chunk, which streamText wraps in a StreamProviderError) leads with its message.
function describe(error) {
  if (error instanceof Error && error.name === 'AI_StreamProviderError') return `${error.message} (${error.name})`;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  if (error && typeof error === 'object' && typeof error.message === 'string') return error.message;
  return JSON.stringify(error) ?? String(error);
}

async function step(job, tools) {
  const providerCalls = [];
  const model = tapping(await MODELS[job.dialect](serving(job.body)), providerCalls);
  const result = streamText({ model, prompt: 'lens', tools, maxRetries: 0, onError: () => {} });
  const parts = [];
  let thrown = null;
  try {
    for await (const part of result.fullStream) parts.push(part);
  } catch (error) {
    thrown = describe(error); // the agent's loop over fullStream raises this
  }
  return { parts, providerCalls, thrown };
}

function offered(parts) {
  const names = parts
    .filter((part) => part.type === 'tool-call' && !part.providerExecuted)
    .map((part) => part.toolName);
  return Object.fromEntries(names.map((name) => [name, tool({ inputSchema: z.looseObject({}) })]));
}

function callOf(part, providerCall) {
  return {
    id: part.toolCallId ?? null,
    name: part.toolName ?? null,
    input_text: typeof providerCall?.input === 'string' ? providerCall.input : null,
    input: part.input ?? null,
    invalid: Boolean(part.invalid),
    error: part.invalid ? describe(part.error) : null,
    provider_executed: Boolean(part.providerExecuted),
  };
}

function answer({ parts, providerCalls, thrown }) {
  const calls = [];
  const errors = [];
  let finish = null;
  for (const part of parts) {
    if (part.type === 'tool-call') calls.push(callOf(part, providerCalls[calls.length]));
    else if (part.type === 'error') errors.push(describe(part.error));
    else if (part.type === 'finish') finish = { reason: part.finishReason, raw: part.rawFinishReason ?? null };
  }
  return { calls, errors, thrown, finish, provider_calls: providerCalls.length };
}

// Node's fetch (undici) compiles its HTTP parser to WebAssembly when `Response`
// is first used; no request is ever made here, and under a tight address-space
// limit (the lens runner's) that compile fails after the fact.  Only that
// failure is passed over; any other unhandled rejection still ends the run.
process.on('unhandledRejection', (reason) => {
  const parser = reason instanceof Error && String(reason.stack).includes('lazyllhttp');
  if (!parser) throw reason;
});

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  if (!Object.hasOwn(MODELS, job.dialect)) throw new Error(`no provider for the dialect ${job.dialect}`);
  const first = await step(job, {});
  const tools = offered(first.parts);
  const last = Object.keys(tools).length ? await step(job, tools) : first;
  process.stdout.write(JSON.stringify(answer(last)));
}

await main();
