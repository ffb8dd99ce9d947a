"""The pages, one module for what each page or panel shows; each holds its
view or its part of the context and the queries only it makes.  What several
pages share has a module named for it: `paging` (page arithmetic and links),
`assemblies` (assemblies with their call count), `frames` (frame tables and
permalinks), `fragment_text`, `timeline` and `usage`."""
