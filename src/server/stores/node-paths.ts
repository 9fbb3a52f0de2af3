/* Node path arithmetic for the stores and the engine: joining, a path's name, its parent and
 * its ancestors. */

/** `/a/b` + `c` -> `/a/b/c`. */
export function joinPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/** The last segment of a node path. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** The parent of a node path: `/a/b/c` -> `/a/b`. */
export function parentPath(path: string): string {
  return path.slice(0, path.lastIndexOf('/')) || '/';
}

/** Ancestors of `path`, outermost first: `/a/b/c` -> [`/a`, `/a/b`]. */
export function ancestors(path: string): string[] {
  const parts = path.split('/').slice(1, -1);
  return parts.map((_, i) => `/${parts.slice(0, i + 1).join('/')}`);
}
