// Vite bundles stylesheets imported for their side effect.
declare module '*.css';
