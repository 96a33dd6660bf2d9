/**
 * Workspace event patterns (SPEC, "Workspace webhook events"): colon-separated segments matched
 * against `<channel>:<event>`. `*` stands for exactly one segment; a pattern matches every event
 * it is a prefix of (`items` matches `items:posts:created`); a pattern longer than the event
 * never matches. A dotted pattern (`items.posts.created`) is one segment that equals no channel
 * segment, so it never matches, yet is accepted when saved.
 */
export function matchesWorkspaceEvent(pattern: string, eventName: string): boolean {
  const want = pattern.split(":");
  const have = eventName.split(":");
  if (want.length > have.length) return false;
  return want.every((segment, i) => segment === "*" || segment === have[i]);
}

export function matchesAnyPattern(patterns: readonly string[], eventName: string): boolean {
  return patterns.some((pattern) => matchesWorkspaceEvent(pattern, eventName));
}

/**
 * The `data` a hook receives (SPEC rule 6): the whole row unless `payloadFields` names top-level
 * keys; listed keys the row lacks are left out (never null); nested objects go whole; data that
 * is not an object (an array or a scalar) passes through unchanged.
 */
export function projectPayload(data: unknown, payloadFields: readonly string[] | null): unknown {
  if (!payloadFields || payloadFields.length === 0) return data;
  if (typeof data !== "object" || data === null || Array.isArray(data)) return data;
  const source = data as Record<string, unknown>;
  const projected: Record<string, unknown> = {};
  for (const field of payloadFields) {
    // defineProperty, not assignment: a listed `__proto__` is a key like any other.
    if (Object.hasOwn(source, field)) {
      Object.defineProperty(projected, field, {
        value: source[field],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return projected;
}
