// A link's query string made whole with this page's own address.
(q) => q ? location.origin + location.pathname + q : q
