/** Options of autocannon's programmatic API that this benchmark uses beyond bench/api/autocannon.d.ts. */
declare module "autocannon" {
  export interface RequestParams {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
  }
  export interface Options {
    /** A request sequence each connection repeats; `setupRequest` shapes each request as it is sent. */
    requests?: Array<RequestParams & { setupRequest?: (request: RequestParams) => RequestParams }>;
  }
}
