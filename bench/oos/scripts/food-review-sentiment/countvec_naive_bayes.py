# idiom: CountVectorizer with English stop words + MultinomialNB, quick holdout check, probabilities of the 'great' column picked by name; intended: valid
import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import MultinomialNB

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

X_tr, X_va, y_tr, y_va = train_test_split(train["review"], train["score"], test_size=0.2, random_state=0,
                                          stratify=train["score"])
vect = CountVectorizer(stop_words="english", min_df=2, ngram_range=(1, 2))
nb = MultinomialNB(alpha=0.5)
nb.fit(vect.fit_transform(X_tr), y_tr)
great = list(nb.classes_).index("great")
print("holdout AUC:", roc_auc_score(y_va == "great", nb.predict_proba(vect.transform(X_va))[:, great]))

vect = CountVectorizer(stop_words="english", min_df=2, ngram_range=(1, 2))
nb = MultinomialNB(alpha=0.5).fit(vect.fit_transform(train["review"]), train["score"])
great = int(np.flatnonzero(nb.classes_ == "great")[0])
probs = nb.predict_proba(vect.transform(test["review"]))[:, great]
pd.DataFrame({"id": test["id"], "score": probs}).to_csv("submission.csv", index=False)
