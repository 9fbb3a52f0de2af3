/**
 * Reads a V8 .heapsnapshot (as `node --heapsnapshot-signal` or `v8.writeHeapSnapshot` write it)
 * and counts its objects by class: how many, their own bytes, and the bytes they retain (what
 * would be freed with them: the dominator tree, as Chrome DevTools computes it).
 *
 * Snapshots of a server with tens of thousands of locks run to hundreds of MB, past the longest
 * string V8 will JSON.parse, so the arrays are read straight off the bytes.
 */
import { readFile } from 'node:fs/promises';

export interface HeapSnapshot {
  readonly nodeCount: number;
  /** Per node ordinal: its class (see classOf), own bytes, first edge index and edge count. */
  readonly classIds: Uint32Array;
  readonly classNames: readonly string[];
  readonly selfSizes: Uint32Array;
  readonly retainedSizes: Float64Array;
  /** Per node ordinal, the ordinal of its immediate dominator (the root's is itself). */
  readonly dominators: Uint32Array;
  /** Where a node is first held from: `Class.property` (a context's `.variable`, an array's `[]`). */
  heldAt(node: number): string;
}

export interface ClassCensus {
  readonly count: number;
  readonly selfBytes: number;
  /** Bytes retained by the instances no other instance of the class retains (DevTools' figure). */
  readonly retainedBytes: number;
}

const NODE_TYPES_WITHOUT_CLASS: Record<string, string> = {
  string: '(string)',
  'concatenated string': '(string)',
  'sliced string': '(string)',
  number: '(heap number)',
  code: '(compiled code)',
  symbol: '(symbol)',
  bigint: '(bigint)',
  regexp: '(regexp)',
  'object shape': '(object shape)',
};

/** A node's class: a JS object's constructor, a closure's function, an internal kind. */
function classOf(type: string, name: string): string {
  const fixed = NODE_TYPES_WITHOUT_CLASS[type];
  if (fixed !== undefined) return fixed;
  switch (type) {
    case 'object':
      return name;
    case 'closure':
      return `${name || '(anonymous)'}() closure`;
    case 'array':
      return `(array) ${name}`;
    case 'hidden':
      // "system / Context" is a closure's captured scope; other hidden names are V8 internals.
      return `(hidden) ${name.replace(/ @\d+$/, '').slice(0, 60)}`;
    default:
      return `(${type}) ${name.replace(/ @\d+$/, '').slice(0, 60)}`;
  }
}

/** Adds `by` to `array[index]`; returns the new value. */
function bump(array: Uint32Array | Float64Array, index: number, by: number): number {
  const value = (array[index] as number) + by;
  array[index] = value;
  return value;
}

/** Reads `[n,n,n,...]` starting at `from` (just after the `[`) into `into`; returns how many. */
function readNumbers(bytes: Buffer, from: number, into: Uint32Array): number {
  let count = 0;
  let value = 0;
  let inNumber = false;
  for (let i = from; i < bytes.length; i += 1) {
    const byte = bytes[i] as number;
    if (byte >= 48 && byte <= 57) {
      value = value * 10 + (byte - 48);
      inNumber = true;
    } else {
      if (inNumber) {
        into[count++] = value;
        value = 0;
        inNumber = false;
      }
      if (byte === 93) return count; // ]
    }
  }
  throw new Error('heap snapshot: an array does not end');
}

function readStrings(bytes: Buffer, from: number): string[] {
  const strings: string[] = [];
  let i = from;
  for (;;) {
    while (bytes[i] !== 34 && bytes[i] !== 93) i += 1; // to the next " or ]
    if (bytes[i] === 93) return strings;
    const start = i;
    let escaped = false;
    for (i += 1; bytes[i] !== 34; i += 1) {
      if (bytes[i] === 92) {
        escaped = true;
        i += 1;
      }
    }
    i += 1;
    strings.push(
      escaped
        ? (JSON.parse(bytes.toString('utf8', start, i)) as string)
        : bytes.toString('utf8', start + 1, i - 1),
    );
  }
}

interface Meta {
  node_fields: string[];
  node_types: [string[], ...unknown[]];
  edge_fields: string[];
  edge_types: [string[], ...unknown[]];
}

export async function readHeapSnapshot(file: string): Promise<HeapSnapshot> {
  const bytes = await readFile(file);
  const at = (marker: string): number => {
    const index = bytes.indexOf(marker);
    if (index < 0) throw new Error(`${file}: no ${marker} (not a V8 heap snapshot?)`);
    return index + marker.length;
  };
  const nodesAt = at('"nodes":[');
  const header = JSON.parse(
    `${bytes
      .toString('utf8', 0, nodesAt - '"nodes":['.length)
      .trim()
      .replace(/,$/, '')}}`,
  ) as { snapshot: { meta: Meta; node_count: number; edge_count: number } };
  const { meta, node_count: nodeCount, edge_count: edgeCount } = header.snapshot;
  const nodeFields = meta.node_fields.length;
  const edgeFields = meta.edge_fields.length;
  const nodes = new Uint32Array(nodeCount * nodeFields);
  const edges = new Uint32Array(edgeCount * edgeFields);
  if (readNumbers(bytes, nodesAt, nodes) !== nodes.length) throw new Error(`${file}: node count differs`);
  if (readNumbers(bytes, at('"edges":['), edges) !== edges.length)
    throw new Error(`${file}: edge count differs`);
  const strings = readStrings(bytes, at('"strings":['));

  const typeField = meta.node_fields.indexOf('type');
  const nameField = meta.node_fields.indexOf('name');
  const sizeField = meta.node_fields.indexOf('self_size');
  const edgeCountField = meta.node_fields.indexOf('edge_count');
  const edgeTypeField = meta.edge_fields.indexOf('type');
  const toNodeField = meta.edge_fields.indexOf('to_node');
  const nodeTypes = meta.node_types[0];
  const weak = meta.edge_types[0].indexOf('weak');
  const shortcut = meta.edge_types[0].indexOf('shortcut');

  const classIds = new Uint32Array(nodeCount);
  const classNames: string[] = [];
  const classIndex = new Map<string, number>();
  const selfSizes = new Uint32Array(nodeCount);
  const firstEdge = new Uint32Array(nodeCount + 1);
  const classId = (name: string): number => {
    let id = classIndex.get(name);
    if (id === undefined) {
      id = classNames.push(name) - 1;
      classIndex.set(name, id);
    }
    return id;
  };
  for (let n = 0; n < nodeCount; n += 1) {
    const base = n * nodeFields;
    const name = classOf(
      nodeTypes[nodes[base + typeField] as number] ?? '?',
      strings[nodes[base + nameField] as number] ?? '',
    );
    classIds[n] = classId(name);
    selfSizes[n] = nodes[base + sizeField] as number;
    firstEdge[n + 1] = (firstEdge[n] as number) + (nodes[base + edgeCountField] as number);
  }
  // DevTools' rule: weak edges never retain; shortcuts only from the root (they mark user roots).
  const essential = (from: number, edge: number): boolean => {
    const type = edges[edge * edgeFields + edgeTypeField];
    return type !== weak && (type !== shortcut || from === 0);
  };
  const target = (edge: number): number => (edges[edge * edgeFields + toNodeField] as number) / nodeFields;

  // Retainers of each node over essential edges.
  const firstRetainer = new Uint32Array(nodeCount + 1);
  for (let n = 0; n < nodeCount; n += 1) {
    for (let e = firstEdge[n] as number; e < (firstEdge[n + 1] as number); e += 1) {
      if (essential(n, e)) bump(firstRetainer, target(e) + 1, 1);
    }
  }
  for (let n = 0; n < nodeCount; n += 1) bump(firstRetainer, n + 1, firstRetainer[n] as number);
  const retainers = new Uint32Array(firstRetainer[nodeCount] as number);
  const retainingEdges = new Uint32Array(retainers.length);
  const filled = firstRetainer.slice(0, nodeCount);
  for (let n = 0; n < nodeCount; n += 1) {
    for (let e = firstEdge[n] as number; e < (firstEdge[n + 1] as number); e += 1) {
      if (!essential(n, e)) continue;
      const slot = bump(filled, target(e), 1) - 1;
      retainers[slot] = n;
      retainingEdges[slot] = e;
    }
  }
  const element = meta.edge_types[0].indexOf('element');
  const hidden = meta.edge_types[0].indexOf('hidden');
  const edgeNameField = meta.edge_fields.indexOf('name_or_index');
  const heldAt = (node: number, hops = 3): string => {
    const slot = firstRetainer[node] as number;
    if (slot === firstRetainer[node + 1]) return '(unreferenced)';
    const e = retainingEdges[slot] as number;
    const type = edges[e * edgeFields + edgeTypeField];
    const name = edges[e * edgeFields + edgeNameField] as number;
    // WeakMap entries are named after their whole key -> value pair: keep the start.
    const edge = type === element || type === hidden ? '[]' : `.${(strings[name] ?? '?').slice(0, 40)}`;
    const retainer = retainers[slot] as number;
    const retainerClass = classNames[classIds[retainer] as number] ?? '?';
    // An array's element says little: say whose array it is.
    if (edge === '[]' && hops > 1 && /^(Array$|\(array\))/.test(retainerClass)) {
      return `${heldAt(retainer, hops - 1)}[]`;
    }
    return `${retainerClass}${edge}`;
  };
  // An anonymous function says little: name it after where it is kept (a variable, a property).
  // A suspended async function is a "Generator" to V8: name it after its function.
  const anonymous = classNames.indexOf('(anonymous)() closure');
  const generator = classNames.indexOf('Generator');
  const functionEdge = strings.indexOf('function');
  for (let n = 0; n < nodeCount; n += 1) {
    if (classIds[n] === anonymous) classIds[n] = classId(`(anonymous)() closure at ${heldAt(n)}`);
    if (classIds[n] !== generator) continue;
    for (let e = firstEdge[n] as number; e < (firstEdge[n + 1] as number); e += 1) {
      if (
        edges[e * edgeFields + edgeNameField] !== functionEdge ||
        edges[e * edgeFields + edgeTypeField] === element
      )
        continue;
      const fn = classNames[classIds[target(e)] as number] ?? '?';
      classIds[n] = classId(`async frame of ${fn.replace(/ closure.*$/, '')}`);
      break;
    }
  }

  // Post-order over essential edges from the root; what the root does not reach hangs off it.
  const NONE = 0xffffffff;
  const postOrder = new Uint32Array(nodeCount); // post-order index -> ordinal
  const orderOf = new Uint32Array(nodeCount).fill(NONE); // ordinal -> post-order index
  const visited = new Uint8Array(nodeCount);
  const orphan = new Uint8Array(nodeCount);
  const stack = new Uint32Array(nodeCount);
  const cursor = new Uint32Array(nodeCount);
  let order = 0;
  const walk = (start: number): void => {
    let depth = 0;
    stack[0] = start;
    cursor[0] = firstEdge[start] as number;
    visited[start] = 1;
    while (depth >= 0) {
      const n = stack[depth] as number;
      const e = cursor[depth] as number;
      if (e < (firstEdge[n + 1] as number)) {
        cursor[depth] = e + 1;
        const to = target(e);
        if (!visited[to] && essential(n, e)) {
          visited[to] = 1;
          depth += 1;
          stack[depth] = to;
          cursor[depth] = firstEdge[to] as number;
        }
      } else {
        orderOf[n] = order;
        postOrder[order++] = n;
        depth -= 1;
      }
    }
  };
  // As if the root had one more edge to each node it does not reach, taken after its own: the
  // root's walk, then theirs, then the root itself (post-order of that one spanning tree).
  walk(0);
  order -= 1; // the root, renumbered last below
  for (let n = 1; n < nodeCount; n += 1) {
    if (visited[n]) continue;
    orphan[n] = 1;
    walk(n);
  }
  orderOf[0] = order;
  postOrder[order++] = 0;
  const root = nodeCount - 1;

  // Cooper, Harvey and Kennedy's iterative dominators, over post-order indices.
  const dom = new Uint32Array(nodeCount).fill(NONE);
  dom[root] = root;
  for (let changed = true; changed;) {
    changed = false;
    for (let p = root - 1; p >= 0; p -= 1) {
      const n = postOrder[p] as number;
      let idom = orphan[n] ? root : NONE;
      for (
        let r = firstRetainer[n] as number;
        r < (firstRetainer[n + 1] as number) && idom !== root;
        r += 1
      ) {
        let a = orderOf[retainers[r] as number] as number;
        if (a === NONE || dom[a] === NONE) continue;
        if (idom === NONE) {
          idom = a;
          continue;
        }
        let b = idom;
        while (a !== b) {
          while (a < b) a = dom[a] as number;
          while (b < a) b = dom[b] as number;
        }
        idom = a;
      }
      if (idom !== NONE && dom[p] !== idom) {
        dom[p] = idom;
        changed = true;
      }
    }
  }
  const retainedSizes = new Float64Array(nodeCount);
  const dominators = new Uint32Array(nodeCount);
  for (let p = 0; p < nodeCount; p += 1) retainedSizes[p] = selfSizes[postOrder[p] as number] as number;
  for (let p = 0; p < root; p += 1) {
    const d = dom[p] === NONE ? root : (dom[p] as number);
    bump(retainedSizes, d, retainedSizes[p] as number);
  }
  // Back from post-order indices to ordinals.
  const retainedByOrdinal = new Float64Array(nodeCount);
  for (let p = 0; p < nodeCount; p += 1) {
    const n = postOrder[p] as number;
    retainedByOrdinal[n] = retainedSizes[p] as number;
    dominators[n] = postOrder[dom[p] === NONE ? root : (dom[p] as number)] as number;
  }
  return {
    nodeCount,
    classIds,
    classNames,
    selfSizes,
    retainedSizes: retainedByOrdinal,
    dominators,
    heldAt,
  };
}

/** Children lists of the dominator tree, as CSR arrays. */
function dominatorChildren(snapshot: HeapSnapshot): { first: Uint32Array; children: Uint32Array } {
  const { nodeCount, dominators } = snapshot;
  const first = new Uint32Array(nodeCount + 1);
  for (let n = 0; n < nodeCount; n += 1)
    if (dominators[n] !== n) bump(first, (dominators[n] as number) + 1, 1);
  for (let n = 0; n < nodeCount; n += 1) bump(first, n + 1, first[n] as number);
  const children = new Uint32Array(first[nodeCount] as number);
  const filled = first.slice(0, nodeCount);
  for (let n = 0; n < nodeCount; n += 1)
    if (dominators[n] !== n) children[bump(filled, dominators[n] as number, 1) - 1] = n;
  return { first, children };
}

/**
 * Visits the dominator tree depth-first from the root: `enter` on the way down, `leave` on the
 * way up.
 */
function walkDominatorTree(
  snapshot: HeapSnapshot,
  enter: (node: number) => void,
  leave: (node: number) => void,
): void {
  const { first, children } = dominatorChildren(snapshot);
  const stack = new Uint32Array(snapshot.nodeCount);
  const cursor = new Uint32Array(snapshot.nodeCount);
  let depth = 0;
  stack[0] = 0;
  cursor[0] = first[0] as number;
  enter(0);
  while (depth >= 0) {
    const n = stack[depth] as number;
    const c = cursor[depth] as number;
    if (c < (first[n + 1] as number)) {
      cursor[depth] = c + 1;
      const child = children[c] as number;
      enter(child);
      depth += 1;
      stack[depth] = child;
      cursor[depth] = first[child] as number;
    } else {
      leave(n);
      depth -= 1;
    }
  }
}

/** Count, own bytes and retained bytes of every class in the snapshot. */
export function census(snapshot: HeapSnapshot): Map<string, ClassCensus> {
  const classes = snapshot.classNames.length;
  const count = new Float64Array(classes);
  const self = new Float64Array(classes);
  const retained = new Float64Array(classes);
  const onPath = new Uint32Array(classes);
  walkDominatorTree(
    snapshot,
    (n) => {
      const c = snapshot.classIds[n] as number;
      bump(count, c, 1);
      bump(self, c, snapshot.selfSizes[n] as number);
      if (onPath[c] === 0) bump(retained, c, snapshot.retainedSizes[n] as number);
      bump(onPath, c, 1);
    },
    (n) => {
      bump(onPath, snapshot.classIds[n] as number, -1);
    },
  );
  const out = new Map<string, ClassCensus>();
  snapshot.classNames.forEach((name, c) => {
    out.set(name, {
      count: count[c] as number,
      selfBytes: self[c] as number,
      retainedBytes: retained[c] as number,
    });
  });
  return out;
}

/**
 * What instances of `owner` hold: the class census of the nodes whose nearest dominating
 * instance of any class in `owners` is one of `owner`'s, for each owner.
 */
export function ownedBy(
  snapshot: HeapSnapshot,
  owners: readonly string[],
): Map<string, Map<string, ClassCensus>> {
  const ownerIds = new Set(owners.map((name) => snapshot.classNames.indexOf(name)).filter((id) => id >= 0));
  const result = new Map<string, Map<string, ClassCensus>>();
  const ownerStack: number[] = [];
  walkDominatorTree(
    snapshot,
    (n) => {
      const c = snapshot.classIds[n] as number;
      const isOwner = ownerIds.has(c);
      const owner = isOwner ? c : ownerStack.at(-1);
      if (isOwner) ownerStack.push(c);
      if (owner === undefined) return;
      const ownerName = snapshot.classNames[owner] ?? '?';
      const byClass = result.get(ownerName) ?? new Map<string, ClassCensus>();
      result.set(ownerName, byClass);
      const name = snapshot.classNames[c] ?? '?';
      const was = byClass.get(name) ?? { count: 0, selfBytes: 0, retainedBytes: 0 };
      byClass.set(name, {
        count: was.count + 1,
        selfBytes: was.selfBytes + (snapshot.selfSizes[n] as number),
        retainedBytes: 0,
      });
    },
    (n) => {
      if (ownerIds.has(snapshot.classIds[n] as number)) ownerStack.pop();
    },
  );
  return result;
}

/** The `count` instances of `classes` that retain the most, with where each is held. */
export function largest(
  snapshot: HeapSnapshot,
  classes: readonly string[],
  count: number,
): Array<{ name: string; heldAt: string; retainedBytes: number }> {
  const ids = new Set(classes.map((name) => snapshot.classNames.indexOf(name)));
  const found: number[] = [];
  for (let n = 0; n < snapshot.nodeCount; n += 1) if (ids.has(snapshot.classIds[n] as number)) found.push(n);
  found.sort((a, b) => (snapshot.retainedSizes[b] as number) - (snapshot.retainedSizes[a] as number));
  return found.slice(0, count).map((n) => ({
    name: snapshot.classNames[snapshot.classIds[n] as number] ?? '?',
    heldAt: snapshot.heldAt(n),
    retainedBytes: snapshot.retainedSizes[n] as number,
  }));
}

/** Per unit (a held lock, a waiter): `after - before` of every class, divided by `units`. */
export function perUnit(
  before: Map<string, ClassCensus>,
  after: Map<string, ClassCensus>,
  units: number,
): Array<{ name: string } & ClassCensus> {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].map((name) => {
    const b = before.get(name) ?? { count: 0, selfBytes: 0, retainedBytes: 0 };
    const a = after.get(name) ?? { count: 0, selfBytes: 0, retainedBytes: 0 };
    return {
      name,
      count: (a.count - b.count) / units,
      selfBytes: (a.selfBytes - b.selfBytes) / units,
      retainedBytes: (a.retainedBytes - b.retainedBytes) / units,
    };
  });
}
