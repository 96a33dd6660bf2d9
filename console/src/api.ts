import { createPlinthClient, createWorkspaceClient, type PlinthError } from "../../src/client/index.ts";

/**
 * The console's API: the SDK on this origin, signed in by the session cookie the browser holds
 * (same-origin requests send it, and the API's cross-site checks pass for them).
 */
export const api = createPlinthClient({ url: location.origin });

/** A project's workspace API, as an org admin (the session cookie is an admin of the project's org). */
export function workspaceApi(projectId: string) {
  return createWorkspaceClient({ workspaceUrl: `${location.origin}/w/${projectId}` });
}

/** An API error as the console shows it: the message, and for a 422 the message of each field. */
export interface Problem {
  code: string;
  message: string;
  requestId?: string;
  fields: Record<string, string>;
}

/** Thrown by `data` for an answer that is not a 2xx. */
export class ApiProblem extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

/** The one place an API error envelope (or a failed request) becomes what the console shows. */
export function problemOf(error: unknown, response?: Response): Problem {
  if (error instanceof ApiProblem) return error.problem;
  const envelope = (error as PlinthError | undefined)?.error;
  if (envelope) {
    const fields: Record<string, string> = {};
    if (envelope.code === "VALIDATION" && Array.isArray(envelope.details)) {
      for (const detail of envelope.details as { path?: string; message?: string }[]) {
        if (detail.path && detail.message && !fields[detail.path]) fields[detail.path] = detail.message;
      }
    }
    return {
      code: envelope.code,
      message: envelope.message,
      fields,
      ...(envelope.requestId ? { requestId: envelope.requestId } : {}),
    };
  }
  if (error instanceof Error) return { code: "NETWORK", message: `The request failed: ${error.message}`, fields: {} };
  return {
    code: `HTTP_${response?.status ?? 0}`,
    message: response ? `The request failed (HTTP ${response.status})` : "The request failed",
    fields: {},
  };
}

/** The data of an answer, or an ApiProblem carrying its error. */
export async function data<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await pending;
  } catch (error) {
    throw new ApiProblem(problemOf(error));
  }
  if (!answer.response.ok) throw new ApiProblem(problemOf(answer.error, answer.response));
  return answer.data as T;
}
