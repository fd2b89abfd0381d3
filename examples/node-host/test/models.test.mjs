import assert from "node:assert/strict";
import { test } from "node:test";
import { ModelsError, parseCatalog, pickedModel } from "../src/models.mjs";

/**
 * @param {string} id
 * @param {string[]} [efforts]
 */
const model = (id, efforts = []) => ({
  provider: "deepseek-official",
  provider_name: "DeepSeek",
  id,
  name: id.toUpperCase(),
  reasoning_options: efforts.map((e) => ({ id: e, name: e })),
});
/**
 * @param {unknown[]} models
 * @param {Record<string, unknown>} [patch]
 */
const line = (models, patch = {}) =>
  `${JSON.stringify({ v: 1, type: "models", runtime: "open-design", models, ...patch })}\n`;
/** @param {() => unknown} fn */
const codeOf = (fn) => {
  try {
    fn();
    return null;
  } catch (error) {
    assert.ok(error instanceof ModelsError);
    return error.code;
  }
};

test("repeated routes and efforts are dropped, the first wins", () => {
  const catalog = parseCatalog(line([model("a", ["low", "high", "low"]), model("b"), model("a", ["max"])]));
  assert.deepEqual(
    catalog.map((m) => [m.id, m.reasoning_options.map((o) => o.id)]),
    [
      ["a", ["low", "high"]],
      ["b", []],
    ],
  );
});

test("bad answers have their codes", () => {
  assert.equal(
    codeOf(() => parseCatalog(line([]))),
    "DSH_PROFILE_MODELS_EMPTY",
  );
  assert.equal(
    codeOf(() => parseCatalog("{not json\n")),
    "DSH_PROFILE_MODELS_INVALID",
  );
  assert.equal(
    codeOf(() => parseCatalog(line([model("a")]) + line([model("b")]))),
    "DSH_PROFILE_MODELS_INVALID",
  );
  assert.equal(
    codeOf(() => parseCatalog(line([model("a")], { runtime: "multica" }))),
    "DSH_PROFILE_MODELS_INVALID",
  );
  const { name, ...nameless } = model("a");
  assert.equal(name, "A");
  assert.equal(
    codeOf(() => parseCatalog(line([nameless]))),
    "DSH_PROFILE_MODELS_INVALID",
  );
  assert.equal(
    codeOf(() => parseCatalog(" ".repeat(64 * 1024 + 1))),
    "DSH_PROFILE_MODELS_INVALID",
  );
});

test("a picked route is provider/id or default", () => {
  assert.equal(pickedModel({ route: "default" }), null);
  assert.deepEqual(pickedModel({ route: "p/org/m" }), { provider: "p", id: "org/m" });
  assert.deepEqual(pickedModel({ model: { provider: "p", id: "m" } }), { provider: "p", id: "m" });
  for (const bad of ["m", "/m", "p/", "p /m"])
    assert.equal(
      codeOf(() => pickedModel({ route: bad })),
      "DSH_PROFILE_INVALID_ROUTE",
    );
});
