/**
 * SCIM filters (RFC 7644 §3.4.2.2): `attrPath op value`, `attrPath pr`, `and`, `or`, `not (…)`
 * and parentheses, over the attributes `valuesOf` reads. Attribute names and operators are
 * case-insensitive; strings compare case-insensitively (every attribute Plinth filters on is
 * `caseExact: false`). Anything else is an `invalidFilter` error.
 */

export class InvalidFilterError extends Error {}

type Comparison = "eq" | "ne" | "co" | "sw" | "ew" | "gt" | "ge" | "lt" | "le";
type Value = string | number | boolean | null;

export type Filter =
  | { kind: "compare"; path: string; op: Comparison; value: Value }
  | { kind: "present"; path: string }
  | { kind: "and" | "or"; left: Filter; right: Filter }
  | { kind: "not"; filter: Filter };

const COMPARISONS = new Set(["eq", "ne", "co", "sw", "ew", "gt", "ge", "lt", "le"]);
/** Longest filter text taken: a filter is a line typed by an identity provider, not a document. */
const MAX_FILTER_LENGTH = 1000;

type Token = { type: "word"; text: string } | { type: "string"; text: string } | { type: "paren"; text: "(" | ")" };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const char = text[i] as string;
    if (char === " " || char === "\t") {
      i++;
    } else if (char === "(" || char === ")") {
      tokens.push({ type: "paren", text: char });
      i++;
    } else if (char === '"') {
      let value = "";
      i++;
      for (;;) {
        if (i >= text.length) throw new InvalidFilterError("a string is not closed");
        const next = text[i] as string;
        if (next === "\\") {
          const escaped = text[i + 1];
          if (escaped === undefined) throw new InvalidFilterError("a string is not closed");
          value += escaped;
          i += 2;
        } else if (next === '"') {
          i++;
          break;
        } else {
          value += next;
          i++;
        }
      }
      tokens.push({ type: "string", text: value });
    } else {
      const start = i;
      while (i < text.length && !/[\s()"]/.test(text[i] as string)) i++;
      tokens.push({ type: "word", text: text.slice(start, i) });
    }
  }
  return tokens;
}

const ATTRIBUTE_PATH = /^[A-Za-z][\w$-]*(\.[A-Za-z][\w$-]*)*$/;

export function parseFilter(text: string): Filter {
  if (text.length > MAX_FILTER_LENGTH)
    throw new InvalidFilterError(`a filter is at most ${MAX_FILTER_LENGTH} characters`);
  const tokens = tokenize(text);
  let position = 0;
  const peekWord = () => {
    const token = tokens[position];
    return token?.type === "word" ? token.text.toLowerCase() : undefined;
  };
  const expression = (): Filter => {
    let left = term();
    while (peekWord() === "or") {
      position++;
      left = { kind: "or", left, right: term() };
    }
    return left;
  };
  const term = (): Filter => {
    let left = factor();
    while (peekWord() === "and") {
      position++;
      left = { kind: "and", left, right: factor() };
    }
    return left;
  };
  const factor = (): Filter => {
    const token = tokens[position];
    if (!token) throw new InvalidFilterError("the filter ends too soon");
    if (token.type === "word" && token.text.toLowerCase() === "not") {
      position++;
      const open = tokens[position];
      if (open?.type !== "paren" || open.text !== "(") throw new InvalidFilterError("'not' must be followed by '('");
      return { kind: "not", filter: factor() };
    }
    if (token.type === "paren" && token.text === "(") {
      position++;
      const inner = expression();
      const close = tokens[position];
      if (close?.type !== "paren" || close.text !== ")") throw new InvalidFilterError("a '(' is not closed");
      position++;
      return inner;
    }
    if (token.type !== "word" || !ATTRIBUTE_PATH.test(token.text)) {
      throw new InvalidFilterError(`expected an attribute name, found '${token.text}'`);
    }
    const path = token.text;
    position++;
    const op = peekWord();
    if (op === "pr") {
      position++;
      return { kind: "present", path };
    }
    if (!op || !COMPARISONS.has(op)) throw new InvalidFilterError(`expected an operator after '${path}'`);
    position++;
    const valueToken = tokens[position];
    if (!valueToken || valueToken.type === "paren")
      throw new InvalidFilterError(`expected a value after '${path} ${op}'`);
    position++;
    return { kind: "compare", path, op: op as Comparison, value: literal(valueToken) };
  };
  const filter = expression();
  if (position !== tokens.length) throw new InvalidFilterError(`unexpected '${tokens[position]?.text}'`);
  return filter;
}

function literal(token: Token): Value {
  if (token.type === "string") return token.text;
  const word = token.text.toLowerCase();
  if (word === "true") return true;
  if (word === "false") return false;
  if (word === "null") return null;
  if (/^-?\d+(\.\d+)?$/.test(token.text)) return Number(token.text);
  throw new InvalidFilterError(`'${token.text}' is not a value (strings are quoted)`);
}

/** Whether a resource matches: `valuesOf(path)` gives an attribute's values (lower-cased path). */
export function matchesFilter(filter: Filter, valuesOf: (path: string) => Value[]): boolean {
  switch (filter.kind) {
    case "and":
      return matchesFilter(filter.left, valuesOf) && matchesFilter(filter.right, valuesOf);
    case "or":
      return matchesFilter(filter.left, valuesOf) || matchesFilter(filter.right, valuesOf);
    case "not":
      return !matchesFilter(filter.filter, valuesOf);
    case "present":
      return valuesOf(filter.path.toLowerCase()).some((value) => value !== null && value !== "");
    case "compare": {
      const values = valuesOf(filter.path.toLowerCase());
      if (filter.op === "ne") return !values.some((value) => compare("eq", value, filter.value));
      return values.some((value) => compare(filter.op, value, filter.value));
    }
  }
}

function compare(op: Comparison, actual: Value, expected: Value): boolean {
  if (typeof actual === "string" && typeof expected === "string") {
    const a = actual.toLowerCase();
    const b = expected.toLowerCase();
    switch (op) {
      case "eq":
        return a === b;
      case "co":
        return a.includes(b);
      case "sw":
        return a.startsWith(b);
      case "ew":
        return a.endsWith(b);
      case "gt":
        return a > b;
      case "ge":
        return a >= b;
      case "lt":
        return a < b;
      case "le":
        return a <= b;
      default:
        return false;
    }
  }
  if (op === "eq") return actual === expected;
  if (typeof actual === "number" && typeof expected === "number") {
    if (op === "gt") return actual > expected;
    if (op === "ge") return actual >= expected;
    if (op === "lt") return actual < expected;
    if (op === "le") return actual <= expected;
  }
  return false;
}
