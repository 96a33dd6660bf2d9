/**
 * Control-plane event patterns: `*` (everything), an exact kind (`project.failed`), or a prefix
 * ending in `.*` (`project.*`). A null or empty list means every event.
 */
export function matchesOrgEvent(patterns: readonly string[] | null, kind: string): boolean {
  if (!patterns || patterns.length === 0) return true;
  return patterns.some(
    (pattern) =>
      pattern === "*" || pattern === kind || (pattern.endsWith(".*") && kind.startsWith(pattern.slice(0, -1))),
  );
}
