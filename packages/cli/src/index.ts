export * from "./cli.js"
export * from "./store.js"
export * from "./time.js"
export * from "./spec.js"
