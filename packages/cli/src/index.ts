/**
 * connector-store's operator CLI: inspect and repair a live store on SQLite or Postgres.
 *
 * @module @connector-store/cli
 */
export * from "./cli.js"
export * from "./store.js"
export * from "./time.js"
export * from "./spec.js"
