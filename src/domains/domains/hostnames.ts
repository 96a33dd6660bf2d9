import { isIP } from "node:net";

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Why `hostname` cannot be a custom domain, or null when it can (DESIGN §10): a lower-case DNS
 * name of two or more labels, ASCII (an IDN as punycode), not an IP address, `localhost`, nor
 * PUBLIC_URL's own host or a name beneath it. `hostname` is already lower-cased and trimmed.
 */
export function hostnameIssue(hostname: string, publicHost: string): string | null {
  if (hostname.length < 3 || hostname.length > 253) return "must be 3 to 253 characters";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range is the point
  if (/[^\x00-\x7f]/.test(hostname)) return "must be ASCII: give an internationalized name as punycode (xn--…)";
  if (isIP(hostname.replace(/^\[|\]$/g, "")) !== 0) return "must be a domain name, not an IP address";
  if (hostname.endsWith(".")) return "must not end with a dot";
  const labels = hostname.split(".");
  if (labels.length < 2) return "must have two or more labels (example.com)";
  for (const label of labels) {
    if (label === "") return "must not have empty labels ('..')";
    if (!LABEL.test(label)) {
      return "labels must be 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'";
    }
  }
  if (/^\d+$/.test(labels[labels.length - 1] as string)) return "must end with a top-level domain, not a number";
  if (labels.includes("localhost")) return "must not be localhost";
  const own = publicHost.toLowerCase();
  if (hostname === own || hostname.endsWith(`.${own}`)) return `must not be ${own} (PUBLIC_URL's host) or beneath it`;
  return null;
}
