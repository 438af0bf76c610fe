"""What a request gets out of a document: shaping, selector schemas, structured data, PDF
text and the tell-tale signs of a bot challenge. Pure functions over one document each."""
