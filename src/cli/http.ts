import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * `fetch` over node:http(s), for the CLI's calls. Node's own fetch (undici) costs a command
 * about 100 ms before its first request is sent, a third of its start-up budget; this sends
 * the same request and answers the same Response.
 */
export async function nodeFetch(input: Request): Promise<Response> {
  const url = new URL(input.url);
  const body = input.body ? Buffer.from(await input.arrayBuffer()) : undefined;
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  const sent: Record<string, string> = {};
  input.headers.forEach((value, name) => {
    sent[name] = value;
  });
  const answer = await new Promise<IncomingMessage>((resolve, reject) => {
    const outgoing = send(url, { method: input.method, headers: sent }, resolve);
    outgoing.once("error", reject);
    outgoing.end(body);
  });
  const chunks: Buffer[] = [];
  for await (const chunk of answer) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, one);
  }
  const status = answer.statusCode ?? 502;
  // A 204, a 304 or an answer to HEAD has no body: a Response refuses one.
  const empty = status === 204 || status === 304 || input.method === "HEAD";
  return new Response(empty ? null : Buffer.concat(chunks), {
    status,
    statusText: answer.statusMessage ?? "",
    headers,
  });
}
