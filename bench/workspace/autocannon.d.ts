/** Options of autocannon's programmatic API that this benchmark uses beyond bench/api/autocannon.d.ts. */
declare module "autocannon" {
  export interface Options {
    /** The request body, sent with every request. */
    body?: string;
  }
}
