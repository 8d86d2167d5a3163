"""TF-IDF features of a document-term count matrix, computed in place to save memory."""

import torch


def tfidf(counts, sublinear=False):
    """counts: (n_docs, n_terms) non-negative term counts."""
    tf = counts.clone().float()
    if sublinear:
        # Meant as 1 + log(tf), but zero counts were not masked out: log(0) = -inf.
        tf.log_().add_(1.0)  # expect: confirmed log
    else:
        # An empty document (all-zero row) makes this 0 / 0.
        tf /= tf.sum(dim=1, keepdim=True)  # expect: confirmed div
    df = (counts > 0).float().sum(dim=0)
    # Smooth idf: df + 1 >= 1 because df counts booleans.
    idf = torch.log((1.0 + counts.shape[0]) / (df + 1.0)) + 1.0  # expect: unproven log, unproven div
    x = tf * idf
    norms = x.pow(2).sum(dim=1, keepdim=True).clamp_min_(1e-12).sqrt_()  # expect: safe sqrt
    # norms >= 1e-6 after the in-place clamp, a fact the static pass does not carry through clamp_min_.
    x /= norms  # expect: unproven div
    return x


if __name__ == "__main__":
    torch.manual_seed(0)
    counts = torch.poisson(torch.rand(5, 12) * 2)
    counts[:, 0] += 1
    print(tfidf(counts).shape)
