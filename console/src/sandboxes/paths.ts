// Path arithmetic of a sandbox's POSIX file system.

/** The directory above dir ("/" stays "/"). */
export function parent(dir: string): string {
  const p = dir.replace(/\/+$/, "").replace(/\/[^/]*$/, "");
  return p === "" ? "/" : p;
}

/** name in dir. */
export function join(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** The last element of path. */
export function baseName(path: string): string {
  return path.replace(/\/+$/, "").split("/").pop() || path;
}
