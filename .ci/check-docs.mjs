#!/usr/bin/env node
// The docs hold together: every relative link of the README, the package
// READMEs and docs/*.md points at a file that exists, and an anchor at a
// heading of it (GitHub's slugs) or an id of a generated API page; and, in
// the API reference built by `npm run docs:api` (docs/api/api.json), every
// property of the domain types (write-back, watch, sync state, pending auth,
// relist, operator and error types: inputs, results, rows) has a JSDoc comment. Run after `npm run docs:api`: links into docs/api need it.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const problems = []

const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`),
  ...readdirSync(join(root, "packages")).map((p) => `packages/${p}/README.md`).filter((f) => existsSync(join(root, f)))
]

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
const slugOf = (heading) =>
  heading.trim().toLowerCase().replace(/`/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

const anchorsOf = (file) => {
  const text = readFileSync(file, "utf8")
  if (file.endsWith(".html")) return new Set([...text.matchAll(/\b(?:id|name)="([^"]+)"/g)].map((m) => m[1]))
  const seen = new Map()
  const anchors = new Set()
  let fenced = false
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line)
    if (heading === null) continue
    const slug = slugOf(heading[1])
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return anchors
}

for (const document of documents) {
  const text = readFileSync(join(root, document), "utf8").replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "")
  for (const [, target] of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z+.-]*:/i.test(target)) continue
    const [path, anchor] = target.split("#")
    const file = path === "" ? join(root, document) : resolve(dirname(join(root, document)), decodeURIComponent(path))
    if (!existsSync(file)) {
      problems.push(`${document}: ${target}: ${relative(root, file)} does not exist`)
      continue
    }
    if (anchor !== undefined && !statSync(file).isDirectory() && !anchorsOf(file).has(decodeURIComponent(anchor))) {
      problems.push(`${document}: ${target}: no heading or id "${anchor}" in ${relative(root, file)}`)
    }
  }
}

// Properties of the domain's inputs, results and rows that must say what they are.
const documented = [
  "packages/core/src/operation/",
  "packages/core/src/watch/",
  "packages/core/src/syncstate/",
  "packages/core/src/pendingauth/",
  "packages/core/src/relist/",
  "packages/core/src/operator/",
  "packages/core/src/limits/",
  "packages/core/src/errors.ts"
]
const api = join(root, "docs/api/api.json")
if (!existsSync(api)) {
  problems.push("docs/api/api.json is missing: run `npm run docs:api` first")
} else {
  // The fields of interfaces and of object types; a discriminated result's variants are explained on the type itself.
  const PROPERTY = 1024
  const walk = (node, path) => {
    const name = [...path, node.name].join(".")
    const source = node.sources?.[0]?.fileName ?? ""
    if (node.kind === PROPERTY && documented.some((folder) => source.startsWith(folder)) && node.comment === undefined &&
      node.inheritedFrom === undefined) {
      problems.push(`${source}: ${name} has no JSDoc`)
    }
    for (const child of node.children ?? []) walk(child, node.kind === 1 || node.kind === 2 ? [] : [...path, node.name])
    if (node.type?.type === "reflection") walk(node.type.declaration, [...path, node.name])
  }
  walk(JSON.parse(readFileSync(api, "utf8")), [])
}

if (problems.length > 0) {
  console.error(problems.join("\n"))
  console.error(`docs: ${problems.length} problem(s)`)
  process.exit(1)
}
console.log(`docs: the links of ${documents.length} documents resolve; the domain types' fields are documented`)
