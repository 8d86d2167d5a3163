// ESLint flat config: the recommended JavaScript and typescript-eslint rules over src/ (the
// extension, its tests and the smoke script). `npm test` runs it first, so CI fails on a finding.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "out/", "node_modules/", "*.vsix"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["src/**/*.ts"],
    rules: {
      // `_`-prefixed parameters are a stub's unused arguments, kept for the signature.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
);
