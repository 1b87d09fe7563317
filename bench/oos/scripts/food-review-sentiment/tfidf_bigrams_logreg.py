# idiom: TfidfVectorizer(word 1-2 grams, sublinear_tf) + LogisticRegression pipeline, cross-validated AUC, C chosen by a small loop; intended: valid
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
texts = train["review"].fillna("")
labels = (train["score"] == "great").astype(int)


def make_pipeline(C):
    return Pipeline([
        ("tfidf", TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_df=0.9, sublinear_tf=True, strip_accents="unicode")),
        ("clf", LogisticRegression(C=C, max_iter=2000)),
    ])


best_C, best_auc = None, -1.0
for C in [1.0, 4.0, 16.0]:
    auc = cross_val_score(make_pipeline(C), texts, labels, cv=3, scoring="roc_auc").mean()
    print(f"C={C}: AUC {auc:.4f}")
    if auc > best_auc:
        best_C, best_auc = C, auc

model = make_pipeline(best_C).fit(texts, labels)
pd.DataFrame({"id": test["id"], "score": model.predict_proba(test["review"].fillna(""))[:, 1]}).to_csv(
    "submission.csv", index=False)
